"""The named parts of a loss between two log lines, kept on their device.

A loss with parts (``{"loss": …, "cos_mse": …}``, a set's ``loss_<set>``) logs each part
averaged over the steps since the last log line. Reading a part to a Python float every
step (``.item()``) makes the host wait for the GPU each step; :class:`LossParts` keeps the
detached values as tensors instead and reads them all in one transfer when the Trainer
writes its log line (every ``logging_steps``). The means are those of the per-step floats,
summed in the same order in float64, as before: the logged numbers are unchanged.
"""

from __future__ import annotations

import torch

#: scalars held per part before they are joined into one tensor on their device (a run
#: that logs rarely, or never, holds one tensor per part, not one per step)
JOIN_EVERY = 256


class LossParts:
    """Named loss values since the last log line: :meth:`add` each step (no host sync),
    :meth:`means` at a log line (one device-to-host transfer for all parts)."""

    def __init__(self) -> None:
        self._values: dict[str, list[torch.Tensor]] = {}

    def __bool__(self) -> bool:
        return bool(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def add(self, name: str, value: torch.Tensor) -> None:
        """Record one value of the part ``name`` (a scalar tensor, on any device)."""
        held = self._values.setdefault(name, [])
        held.append(value.detach().float().reshape(1))
        if len(held) >= JOIN_EVERY:  # on the device: no sync
            self._values[name] = [torch.cat(held)]

    def count(self, name: str) -> int:
        """Values recorded of ``name`` since the last :meth:`means`."""
        return sum(t.numel() for t in self._values.get(name, []))

    def means(self) -> dict[str, float]:
        """Each part's mean over its recorded values, then forget them. The only host sync:
        one transfer of every value."""
        if not self._values:
            return {}
        names = list(self._values)
        device = self._values[names[0]][0].device
        joined = [torch.cat([t.to(device) for t in self._values[name]]) for name in names]
        floats = torch.cat(joined).cpu().tolist()
        self._values.clear()
        means, start = {}, 0
        for name, values in zip(names, joined, strict=True):
            part = floats[start : start + values.numel()]
            start += values.numel()
            means[name] = sum(part) / len(part)
        return means
