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
    assert 'uv run pytest shared/tests "$@"' in script
    assert 'uv run pytest tests "$@"' in script
    assert 'bash .ci/wheels build "$dist"' in script
    assert 'bash .ci/wheels install "$dist" "$package"' in script
    assert 'bash benchmarks/gpu_call_smoke.sh "$dist"' in script
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
