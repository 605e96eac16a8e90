"""The installed methods: the declarations (:class:`sts_core.method.Method`) that method
packages register under the entry-point group ``sts_core.methods``, and the core's own
(:data:`CORE_METHOD`, ``sts-train`` without ``--method``).

Listing the names imports no method package (:func:`installed_method_names`); a name two
distributions declare is refused, naming both (:func:`check_unique`).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

from sts_core.losses.registry import ENTRY_POINT_GROUP
from sts_core.losses.similarity import CosineMSELoss
from sts_core.method import Method, QualityRow
from sts_core.training.config import BaseConfig
from sts_core.training.parser import ConfigError


class MethodDeclarationError(ConfigError):
    """An installed method cannot be used as declared: two distributions declare its name,
    or its entry point is not a :class:`Method` of that name (one line, exit status 2)."""


#: ``core``, sts-core's own method, as :func:`declared_by` names it
CORE_DECLARATION = "sts-core (built in: sts_core.training.method_registry:CORE_METHOD)"


def method_entry_points() -> list[metadata.EntryPoint]:
    """The entry points of group ``sts_core.methods`` of every installed distribution
    (importlib lists a distribution found twice on the path once); nothing is imported."""
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def declared_by(entry_point: metadata.EntryPoint) -> str:
    """``<distribution> (<name> = <module:attribute>)``: who declares a method, and where."""
    dist = getattr(entry_point, "dist", None)
    owner = dist.name if dist is not None else "an unknown distribution"
    return f"{owner} ({entry_point.name} = {entry_point.value})"


def check_unique(name: str, entry_points: Sequence[metadata.EntryPoint]) -> None:
    """:class:`MethodDeclarationError` naming every declaration when more than one installed
    distribution declares the method ``name`` (``core`` is sts-core's own): the last one
    found would otherwise win, silently, and train under the other's name."""
    declarations = [declared_by(ep) for ep in entry_points if ep.name == name]
    if name == CORE_METHOD.name and declarations:
        declarations.insert(0, CORE_DECLARATION)
    if len(declarations) > 1:
        raise MethodDeclarationError(
            f"method {name!r} is declared by {len(declarations)} installed distributions: "
            f"{' and '.join(declarations)}; uninstall all but one (pip uninstall <name>) so "
            "that the name means one method"
        )


def load_method(entry_point: metadata.EntryPoint) -> Method:
    """The :class:`Method` an entry point declares; :class:`MethodDeclarationError` when it
    fails to import, is something else or is a method of another name."""
    try:
        method = entry_point.load()
    except ImportError as error:
        raise MethodDeclarationError(
            f"method {entry_point.name!r} cannot be imported: entry point "
            f"{declared_by(entry_point)} fails with {type(error).__name__}: {error}"
        ) from error
    if not isinstance(method, Method):
        raise MethodDeclarationError(
            f"entry point {declared_by(entry_point)}, group {ENTRY_POINT_GROUP}, is a "
            f"{type(method).__name__}, not a Method"
        )
    if method.name != entry_point.name:
        raise MethodDeclarationError(
            f"entry point {declared_by(entry_point)}, group {ENTRY_POINT_GROUP}, declares "
            f"method {method.name!r}: the entry point's name must be the method's"
        )
    return method


def installed_method_names() -> list[str]:
    """The names a run may ask for (``core`` first, then the installed methods), without
    importing any method package."""
    names = {ep.name for ep in method_entry_points()} - {CORE_METHOD.name}
    return [CORE_METHOD.name, *sorted(names)]


def load_methods() -> dict[str, Method]:
    """Every installed method package's declaration (entry-point group
    ``sts_core.methods``), by name; :class:`MethodDeclarationError` when two distributions
    declare one name (any name: this is the list the benchmarks and documents read)."""
    entry_points = method_entry_points()
    for entry_point in entry_points:
        check_unique(entry_point.name, entry_points)
    methods = {ep.name: load_method(ep) for ep in entry_points}
    return dict(sorted(methods.items()))


def installed_method(name: str) -> Method | None:
    """The method named ``name``: the core's or an installed one; None when there is none.
    :class:`MethodDeclarationError` when two distributions declare ``name`` (a duplicate of
    another name does not matter here: only ``name``'s package is imported)."""
    entry_points = method_entry_points()
    check_unique(name, entry_points)
    if name == CORE_METHOD.name:
        return CORE_METHOD
    declaring = [ep for ep in entry_points if ep.name == name]
    return load_method(declaring[0]) if declaring else None


def quality_rows() -> dict[str, tuple[Method, QualityRow]]:
    """The rows of ``benchmarks/quality.py`` every installed method declares, by key
    ``ours-<row name>``."""
    return {
        f"ours-{row.name}": (method, row)
        for method in load_methods().values()
        for row in method.quality_rows
    }


def _core_method() -> Method:
    return Method(
        name="core",
        title="Cosine-similarity MSE (sentence-transformers CosineSimilarityLoss)",
        config=BaseConfig,
        losses=(CosineMSELoss,),
        description="Train a sentence encoder with cosine MSE.",
    )


#: ``sts-train``: the core's own method (cosine MSE on scored pairs)
CORE_METHOD = _core_method()
