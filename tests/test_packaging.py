"""The distributions install anywhere: one version, ranges that hold, no file paths in
the requirements, a license in each, and tools/set_version.py keeps them so. (Building
the wheels and installing each package from them alone is CI's .ci/wheels.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from launch_support import REPO
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
PACKAGES = sorted(p.parent for p in REPO.glob("packages/*/pyproject.toml"))
TOOL = REPO / "tools" / "set_version.py"


def core_version() -> str:
    text = (REPO / "shared" / "src" / "sts_core" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"$', text, re.M).group(1)


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_sts_core_reports_the_version_its_metadata_carries() -> None:
    import importlib.metadata

    import sts_core

    assert sts_core.__version__ == core_version()
    assert importlib.metadata.version("sts-core") == sts_core.__version__
    shared = tomllib.loads((REPO / "shared" / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" in shared["project"]["dynamic"]
    assert shared["tool"]["hatch"]["version"]["path"] == "src/sts_core/__init__.py"


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda p: p.name)
def test_each_package_needs_sts_core_by_name_in_a_range_holding_its_version(folder: Path) -> None:
    meta = project(folder)
    version = Version(core_version())
    assert Version(meta["version"]) == version
    [core] = [Requirement(r) for r in meta["dependencies"] if r.startswith("sts-core")]
    assert core.url is None, f"{folder.name}: sts-core by a path or URL: {core}"
    assert version in core.specifier
    assert Version(f"{version.major}.{version.minor + 1}.0") not in core.specifier
    assert all("@" not in r for r in meta["dependencies"])


@pytest.mark.parametrize("folder", [REPO / "shared", *PACKAGES], ids=lambda p: p.name)
def test_each_distribution_carries_the_license_and_classifiers(folder: Path) -> None:
    meta = project(folder)
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()
    assert meta["description"] and (folder / meta["readme"]).is_file()
    assert "Programming Language :: Python :: 3.10" in meta["classifiers"]
    assert not any(c.startswith("License ::") for c in meta["classifiers"])  # PEP 639


def test_the_changelog_names_the_version_of_its_newest_release() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## (\d+\.\d+\.\d+) — (\d{4}-\d\d-\d\d)$", changelog, re.M)
    assert releases and releases[0][0] == core_version()


def copy_versioned_files(root: Path) -> None:
    for path in [REPO / "shared" / "src" / "sts_core" / "__init__.py"] + [
        p / "pyproject.toml" for p in PACKAGES
    ]:
        target = root / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)


def set_version(root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(TOOL), *args, "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_set_version_moves_every_one_and_the_ranges_and_check_sees_a_stale_one(
    tmp_path: Path,
) -> None:
    copy_versioned_files(tmp_path)
    assert set_version(tmp_path, "--check").returncode == 0
    done = set_version(tmp_path, "1.4.2")
    assert done.returncode == 0, done.stderr
    init = (tmp_path / "shared/src/sts_core/__init__.py").read_text(encoding="utf-8")
    assert '__version__ = "1.4.2"' in init
    for folder in PACKAGES:
        meta = tomllib.loads((tmp_path / folder.relative_to(REPO) / "pyproject.toml").read_text())
        assert meta["project"]["version"] == "1.4.2"
        [core] = [r for r in meta["project"]["dependencies"] if r.startswith("sts-core")]
        assert str(Requirement(core).specifier) in {">=1.4.2,<1.5", "<1.5,>=1.4.2"}
    (tmp_path / "packages/cosent/pyproject.toml").write_text(
        (REPO / "packages/cosent/pyproject.toml").read_text(encoding="utf-8")
    )
    stale = set_version(tmp_path, "--check")
    assert stale.returncode == 1 and "packages/cosent/pyproject.toml" in stale.stdout


def test_set_version_refuses_what_is_not_a_version(tmp_path: Path) -> None:
    copy_versioned_files(tmp_path)
    refused = set_version(tmp_path, "next")
    assert refused.returncode != 0 and "is not a version" in refused.stderr
    assert set_version(tmp_path, "--check").returncode == 0  # nothing written


def test_the_test_support_loads_only_where_it_is_asked_for(tmp_path: Path) -> None:
    """sts-core registers no pytest11 entry point, so a user's pytest run does not load
    sts_core.testing; each method package asks for it in its own pytest settings."""
    shared = tomllib.loads((REPO / "shared" / "pyproject.toml").read_text(encoding="utf-8"))
    assert "pytest11" not in shared["project"].get("entry-points", {})
    for folder in PACKAGES:
        settings = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
        addopts = settings["tool"]["pytest"]["ini_options"]["addopts"]
        assert "-p sts_core.testing" in addopts, folder.name
    (tmp_path / "test_user.py").write_text(
        "def test_user(request):\n"
        "    assert request.config.pluginmanager.get_plugin('sts_core.testing') is None\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
