"""CI runs what the README says: .ci/run runs .ci/test, which runs each suite on its own,
builds the wheels and installs each package from them alone; the hosted workflow runs the
same commands per package."""

from __future__ import annotations

import yaml
from launch_support import REPO


def test_ci_run_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash .ci/test" in readme
    assert "\nbash .ci/test\n" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_ci_test_runs_each_suite_and_installs_each_package_from_the_wheels() -> None:
    script = (REPO / ".ci" / "test").read_text(encoding="utf-8")
    assert 'uv run pytest shared/tests -n 2 "$@"' in script
    # every cross-package test runs: the launches apart, the rest on two workers
    assert 'uv run pytest tests -n 2 -m "not launch" "$@"' in script
    assert 'uv run pytest tests -m launch "$@"' in script
    assert 'bash .ci/wheels build "$dist"' in script
    assert 'bash .ci/wheels install "$dist" "$package"' in script
    assert 'bash benchmarks/gpu_call_smoke.sh "$dist"' in script
    # every process after the first reads compiled modules instead of compiling torch again
    assert "\nunset PYTHONDONTWRITEBYTECODE\n" in script
    wheels = (REPO / ".ci" / "wheels").read_text(encoding="utf-8")
    assert "uv venv" in wheels and '"$core" "$wheel[test]"' in wheels
    assert "twine check --strict" in wheels


def test_workflow_has_a_job_per_package_with_the_same_commands() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text("utf-8"))
    jobs = workflow["jobs"]
    assert {"lint", "core", "package", "cross-package"} <= set(jobs)
    steps = [step.get("run", "") for step in jobs["package"]["steps"]]
    assert "bash .ci/wheels build dist" in steps
    assert "bash .ci/wheels install dist ${{ matrix.package }}" in steps
    assert "matrix" in jobs["package"]["strategy"]
    assert any(
        "uv run pytest tests" in step.get("run", "") for step in jobs["cross-package"]["steps"]
    )


def test_the_wheel_build_never_deletes_a_folder_it_did_not_fill(tmp_path) -> None:
    import subprocess

    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "notes.txt").write_text("keep", encoding="utf-8")
    (dist / "sts_core-0.0.1-py3-none-any.whl").write_bytes(b"old")
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "wheels"), "build", str(dist)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "holds files a build did not write (notes.txt )" in done.stderr
    assert sorted(p.name for p in dist.iterdir()) == [
        "notes.txt",
        "sts_core-0.0.1-py3-none-any.whl",
    ]
