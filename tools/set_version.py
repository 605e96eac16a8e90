"""Set the version of every distribution (sts-core, each package) in one step, and keep
the ranges true.

    uv run python tools/set_version.py 0.3.0

Writes ``__version__`` in ``shared/src/sts_core/__init__.py`` (sts-core's version: its
pyproject reads it there), ``version`` in each ``packages/<m>/pyproject.toml`` and each
package's requirement on sts-core, ``sts-core>=X.Y.Z,<X.(Y+1)`` (the same minor series).
``--check`` writes nothing and exits 1 when a file disagrees (CI's packaging test does the
same check). Run ``uv lock`` after a change.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parents[1]
CORE_INIT = Path("shared/src/sts_core/__init__.py")
VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.M)
PACKAGE_VERSION = re.compile(r'^version = "([^"]+)"$', re.M)
CORE_REQUIREMENT = re.compile(r'"sts-core(\[[a-z,-]+\])?[^"]*"')


def core_range(version: Version) -> str:
    """The sts-core range a method package of ``version`` needs: this minor series."""
    return f">={version},<{version.major}.{version.minor + 1}"


def package_files(root: Path) -> list[Path]:
    return sorted(root.glob("packages/*/pyproject.toml"))


def rewrite_package(text: str, version: Version, where: Path) -> str:
    if len(PACKAGE_VERSION.findall(text)) != 1 or len(CORE_REQUIREMENT.findall(text)) != 1:
        raise SystemExit(f"{where}: expected one 'version = \"…\"' and one sts-core requirement")
    text = PACKAGE_VERSION.sub(f'version = "{version}"', text)
    wanted = core_range(version)
    return CORE_REQUIREMENT.sub(lambda m: f'"sts-core{m.group(1) or ""}{wanted}"', text)


def planned(root: Path, version: Version) -> dict[Path, str]:
    """Every file this version change touches, with its new text."""
    init = root / CORE_INIT
    text = init.read_text(encoding="utf-8")
    if len(VERSION_LINE.findall(text)) != 1:
        raise SystemExit(f"{init}: expected one '__version__ = \"…\"' line")
    files = {init: VERSION_LINE.sub(f'__version__ = "{version}"', text)}
    for path in package_files(root):
        files[path] = rewrite_package(path.read_text(encoding="utf-8"), version, path)
    return files


def parse_version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise SystemExit(f"{text!r} is not a version (PEP 440: e.g. 0.3.0)") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new version; default: sts-core's")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    current = VERSION_LINE.search((args.root / CORE_INIT).read_text(encoding="utf-8"))
    version = parse_version(args.version or (current.group(1) if current else ""))
    changes = {
        path: text
        for path, text in planned(args.root, version).items()
        if path.read_text(encoding="utf-8") != text
    }
    if args.check:
        for path in changes:
            print(f"{path.relative_to(args.root)}: not at version {version}")
        return 1 if changes else 0
    for path, text in changes.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(args.root)}")
    print(f"version {version}: {len(changes)} file(s) changed; now run `uv lock`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
