"""The one YAML reader of recipes and recipe values (``sts-train --config``, ``sts-launch``,
``sts-search``'s cells and ``--set``, the benchmarks).

PyYAML's safe loader with two refusals, each naming its line:

- a key given twice in one mapping, at any depth (the loader would keep the last one
  silently); a key beside a merge key (``<<: *base``) replaces the merged one, as YAML
  intends;
- aliases that repeat more than :data:`ALIAS_VALUES` values in all, or an alias inside the
  value it names. Counted while the file is composed, before any value is built: a few
  hundred bytes of nested aliases otherwise expand to gigabytes when the values are walked.
"""

from __future__ import annotations

from typing import Any

import yaml

#: how many values (scalars, lists and mappings) a document's aliases may repeat in all
ALIAS_VALUES = 10_000


class RecipeYAMLError(ValueError):
    """YAML the recipe reader refuses; ``line`` (1-based) is where, when known."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line

    @property
    def at(self) -> str:
        """``:12`` after a file name, or nothing when the line is not known."""
        return "" if self.line is None else f":{self.line}"

    @classmethod
    def from_yaml(cls, error: yaml.YAMLError) -> RecipeYAMLError:
        """PyYAML's error as one line: its problem, with what it was parsing and where."""
        mark, context = getattr(error, "problem_mark", None), getattr(error, "context", None)
        problem = getattr(error, "problem", None) or " ".join(str(error).split())
        if context:
            at = getattr(error, "context_mark", None)
            problem += f" ({context}{'' if at is None else f' from line {at.line + 1}'})"
        return cls(None if mark is None else mark.line + 1, f"not valid YAML: {problem}")


class RecipeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing repeated keys and bounding what aliases repeat."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) → values in it, aliases expanded
        self._repeated = 0  # values repeated by the aliases so far

    def compose_node(self, parent: Any, index: Any) -> Any:
        """A node as PyYAML composes it, its size counted (an alias: what it repeats)."""
        alias = self.check_event(yaml.AliasEvent)
        line = self.peek_event().start_mark.line + 1
        node = super().compose_node(parent, index)
        if alias:
            self._count_alias(node, line)
        else:
            self._sizes[id(node)] = 1 + sum(self._sizes[id(child)] for child in _children(node))
        return node

    def _count_alias(self, node: yaml.Node, line: int) -> None:
        size = self._sizes.get(id(node))
        if size is None:  # its node is still being composed: the alias is inside it
            raise RecipeYAMLError(
                line, "an alias inside the value it names (a value holding itself)"
            )
        self._repeated += size
        if self._repeated > ALIAS_VALUES:
            raise RecipeYAMLError(
                line,
                f"the aliases repeat more than {ALIAS_VALUES} values; a recipe's aliases may "
                f"repeat at most {ALIAS_VALUES}: write the values out",
            )

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        """The mapping node, refused when a key is given twice."""
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            line, identity = key.start_mark.line + 1, (key.tag, key.value)
            if identity in seen:
                raise RecipeYAMLError(
                    line,
                    f"{key.value} is given twice (lines {seen[identity]} and {line}): "
                    "give each key once",
                )
            seen[identity] = line
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str) -> tuple[Any, dict[str, int]]:
    """The YAML document in ``text`` and, when it is a mapping, the line (1-based) of each
    of its keys; :class:`RecipeYAMLError` for a repeated key, aliases beyond the bound
    and text that is not YAML."""
    loader = RecipeLoader(text)
    try:
        node = loader.get_single_node()
        content = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as error:
        raise RecipeYAMLError.from_yaml(error) from error
    finally:
        loader.dispose()
    if not isinstance(node, yaml.MappingNode):
        return content, {}
    lines = {
        key.value: key.start_mark.line + 1
        for key, _ in node.value
        if isinstance(key, yaml.ScalarNode)
    }
    return content, lines
