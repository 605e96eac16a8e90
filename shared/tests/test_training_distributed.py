"""all_gather_with_grad: identity in one process; with two gloo processes the gathered,
scaled loss gives the same loss and (DDP-averaged) gradients as one process on the batch."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from sts_core import distributed
from sts_core.distributed import all_gather_with_grad, gathered_loss_scale, world_size

WORKER_DIR = Path(__file__).parent / "fixtures" / "training"
CASES = [[4, 4], [5, 3], [1, 6]]  # batch size of rank 0 and rank 1; last batches differ


def test_single_process_is_identity() -> None:
    tensor = torch.randn(3, 4, requires_grad=True)
    assert world_size() == 1 and gathered_loss_scale() == 1.0
    gathered = all_gather_with_grad(tensor)
    assert gathered is tensor
    gathered.sum().backward()
    assert torch.equal(tensor.grad, torch.ones(3, 4))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_match_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    monkeypatch.syspath_prepend(str(WORKER_DIR))  # spawned children get the parent's sys.path
    import gather_worker

    mp.spawn(
        gather_worker.worker,
        args=(2, free_port(), CASES, distributed.__file__, str(tmp_path)),
        nprocs=2,
        join=True,
    )
    for index, sizes in enumerate(CASES):
        reference = gather_worker.single_process(sum(sizes))
        for rank in range(2):
            result = torch.load(tmp_path / f"case{index}_rank{rank}.pt")
            assert int(result["world_size"]) == 2 and float(result["scale"]) == 2.0
            assert int(result["gathered_rows"]) == sum(sizes)
            torch.testing.assert_close(result["loss"], reference["loss"], rtol=1e-5, atol=1e-6)
            for name in ("weight", "bias"):
                torch.testing.assert_close(
                    result[name], reference[name], rtol=1e-4, atol=1e-6, msg=f"{sizes} {name}"
                )


def test_scale_gathered_gradient_keeps_the_value_and_scales_the_gradient(monkeypatch) -> None:
    weights = torch.tensor([0.5, -1.5, 2.0], requires_grad=True)
    plain = (weights**2).sum()
    (plain_grad,) = torch.autograd.grad(plain, weights)
    monkeypatch.setattr(distributed, "gathered_loss_scale", lambda: 3.0)
    scaled = distributed.scale_gathered_gradient((weights**2).sum())
    (scaled_grad,) = torch.autograd.grad(scaled, weights)
    assert scaled.item() == plain.item()
    assert torch.allclose(scaled_grad, 3.0 * plain_grad)


# ----------------------------------------------------------------- the process's rank
def clear_rank_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in distributed.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, 0),
        ({"RANK": "2"}, 2),
        ({"RANK": " ", "PMI_RANK": "3"}, 3),  # the first that holds a number
        ({"LOCAL_RANK": "1"}, 1),
    ],
)
def test_rank_before_initialisation_is_the_launchers(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], expected: int
) -> None:
    clear_rank_variables(monkeypatch)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert not torch.distributed.is_initialized()
    assert distributed.rank() == expected
    assert distributed.is_main_process() is (expected == 0)


def test_rank_after_initialisation_is_torchs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the process group is up, its rank answers, whatever the environment says."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    clear_rank_variables(monkeypatch)
    monkeypatch.setenv("RANK", "3")
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        assert distributed.rank() == 0 and distributed.is_main_process()
    finally:
        torch.distributed.destroy_process_group()
    assert distributed.rank() == 3 and not distributed.is_main_process()


def test_the_run_and_its_output_folder_ask_the_one_rank() -> None:
    """The output folder's check and the run's messages take the rank from
    :mod:`sts_core.distributed`, not from a reading of their own."""
    from sts_core.training import output, run

    assert output.is_main_process is distributed.is_main_process
    assert run.is_main_process is distributed.is_main_process
    assert run.rank is distributed.rank
