"""Named prompts of a :class:`~sts_core.encoder.SentenceEncoder`, as sentence-transformers
has them (``prompts`` and ``default_prompt_name`` in ``config_sentence_transformers.json``):
texts put before a sentence (``"query: "``) when it is encoded. They are not the prompt
*templates* of :mod:`sts_core.prompts` (``[X]`` slots for decoders), which wrap the
prompted sentence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType


class NamedPrompts:
    """The encoder's :attr:`prompts` (name → text; none until :meth:`set_prompts`, which
    replaces them) and :attr:`default_prompt_name` (the one ``encode`` applies when given
    no ``prompt_name``; None: none)."""

    prompts: Mapping[str, str] = MappingProxyType({})
    default_prompt_name: str | None = None

    def set_prompts(self, prompts: Mapping[str, str], default_name: str | None = None) -> None:
        """Set the named prompts and the default's name (ValueError for a default that is
        not one of them, or a prompt that is not text)."""
        prompts = dict(prompts)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
            raise ValueError(f"prompts must map names to strings, got {prompts!r}")
        if default_name is not None and default_name not in prompts:
            raise ValueError(
                f"default_prompt_name {default_name!r} is not one of the prompts "
                f"({', '.join(prompts) or 'none'})"
            )
        self.prompts, self.default_prompt_name = prompts, default_name

    def prompt_text(self, prompt_name: str | None = None) -> str:
        """The text put before each sentence: ``prompts[prompt_name]``, else the default
        prompt's, else nothing (ValueError for an unknown name)."""
        name = prompt_name if prompt_name is not None else self.default_prompt_name
        if name is None:
            return ""
        if name not in self.prompts:
            raise ValueError(
                f"prompt_name {name!r} is not one of the model's prompts "
                f"({', '.join(self.prompts) or 'none'})"
            )
        return self.prompts[name]

    def prompted(
        self, sentences: str | Sequence[str], prompt_name: str | None = None
    ) -> str | list[str]:
        """``sentences`` with :meth:`prompt_text` before each (as they are without one)."""
        prefix = self.prompt_text(prompt_name)
        if not prefix:
            return sentences if isinstance(sentences, str) else list(sentences)
        return prefix + sentences if isinstance(sentences, str) else [prefix + s for s in sentences]
