"""CI runs what the README says: .ci/run runs .ci/test, which runs each suite on its own,
builds the wheels and installs each package from them alone; the hosted workflow runs the
same commands per package."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import yaml
from launch_support import REPO

TESTING = REPO / "docs" / "testing.md"


def test_ci_run_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash .ci/test" in readme
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^bash \.ci/test( \|\| tests=\$\?)?$", run, re.MULTILINE)


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


def ci_suites(script: str) -> list[str]:
    """The command of each ``suite`` (or ``background TAG``) call of ``.ci/test``, in
    order, as the docs write it:
    ``DIST`` for ``"$dist"``, ``<m>`` for ``"$package"``, without ``"$@"`` and
    ``--durations``."""
    script = script.replace("\\\n", " ")
    name = r'"(?:\$\([^)]*\)|[^"])*"'  # a quoted name, a command substitution in it too
    started = r"(?:\w+=\S+ +)*(?:suite|background +\S+)"  # here, or in the background
    commands = re.findall(rf"^[ \t]*{started} +{name} +(.*)$", script, flags=re.M)
    readable = []
    for command in commands:
        command = re.sub(r'"\$dist([^"]*)"', r"DIST\1", command)
        command = command.replace('"$package"', "<m>").replace('"$@"', "")
        command = re.sub(r"--durations=\d+", "", command)
        readable.append(" ".join(command.split()))
    return readable


def documented_steps(text: str) -> list[list[str]]:
    """The code spans of each numbered item of docs/testing.md's "The test command"."""
    section = text.split("\n## The test command\n", 1)[1].split("\n## ", 1)[0]
    items = re.split(r"^\d+\. ", section, flags=re.M)[1:]
    return [re.findall(r"`([^`]+)`", item.split("\n\n", 1)[0]) for item in items]


def suites_in_order(steps: list[list[str]], suites: list[str]) -> list[int]:
    """For each code span of the steps that begins a suite's command, that suite's index."""
    named = []
    for spans in steps:
        for span in spans:
            named += [
                i for i, suite in enumerate(suites) if suite == span or suite.startswith(span + " ")
            ]
    return named


def test_testing_md_lists_the_suites_of_ci_test_in_its_order() -> None:
    """Each suite `.ci/test` runs is named once by docs/testing.md's numbered steps, in the
    order `.ci/test` runs them; a step naming no suite is stale."""
    suites = ci_suites((REPO / ".ci" / "test").read_text(encoding="utf-8"))
    assert len(suites) >= 5, suites
    steps = documented_steps(TESTING.read_text(encoding="utf-8"))
    named = suites_in_order(steps, suites)
    assert named == list(range(len(suites))), (
        f"docs/testing.md's steps name .ci/test's suites in the order {named}, not once each "
        f"in order; the suites: {suites}"
    )
    stale = [step[:1] for step in steps if not suites_in_order([step], suites)]
    assert not stale, f"docs/testing.md's steps that name no suite of .ci/test: {stale}"


def test_the_suite_reader_finds_each_suite_and_an_order_that_differs() -> None:
    script = (
        'suite "core" uv run pytest shared/tests -n 2 "$@"\n'
        'if [ x ]; then\n  suite "build" bash .ci/wheels build "$dist"\n'
        '  X=1 background smoke "smoke" \\\n'
        '    bash benchmarks/gpu_call_smoke.sh "$dist" "$dist/gpu-check"\nfi\n'
        'suite "tests" \\\n  uv run pytest tests -m launch "$@" --durations=5\n'
        'suite "$(name "$package") installed" bash .ci/wheels install "$dist" "$package"\n'
    )
    suites = ci_suites(script)
    assert suites == [
        "uv run pytest shared/tests -n 2",
        "bash .ci/wheels build DIST",
        "bash benchmarks/gpu_call_smoke.sh DIST DIST/gpu-check",
        "uv run pytest tests -m launch",
        "bash .ci/wheels install DIST <m>",
    ]
    text = (
        "\n## The test command\n\n1. `uv run pytest shared/tests -n 2`: the core;\n"
        "2. `uv run pytest tests -m launch`: `uv build`;\n"
        "3. `bash .ci/wheels build DIST`, then\n   `bash benchmarks/gpu_call_smoke.sh DIST`;\n"
        "4. `bash .ci/wheels install DIST <m>`.\n\nAfter: `uv run pytest shared/tests -n 2`\n"
    )
    steps = documented_steps(text)
    assert steps[1] == ["uv run pytest tests -m launch", "uv build"]
    assert suites_in_order(steps, suites) == [0, 3, 1, 2, 4]


def test_the_wheel_build_expects_two_artifacts_for_the_core_and_each_package(tmp_path) -> None:
    """No count is written in .ci/wheels: a new folder under packages/ adds its wheel and
    sdist to what the build expects."""

    wheels = (REPO / ".ci" / "wheels").read_text(encoding="utf-8")
    assert not re.search(r"-eq \d", wheels), "a written count of artifacts in .ci/wheels"
    [computed] = [line.strip() for line in wheels.splitlines() if "expected=$((" in line]
    for count in (1, 2, 3):
        (tmp_path / "packages" / f"m{count}").mkdir(parents=True)
        (tmp_path / "packages" / f"m{count}" / "pyproject.toml").write_text("", encoding="utf-8")
        done = subprocess.run(
            ["bash", "-c", f'{computed}; echo "$expected"'],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == str(2 * (1 + count))


def run_stand_in_ci(
    tmp_path, wheels: str, gpu_smoke: str, uv: str, environment: dict[str, str]
) -> subprocess.CompletedProcess:
    """``.ci/test`` run in ``tmp_path`` with stand-ins for ``.ci/wheels``, the GPU call's
    smoke script and ``uv`` (shell scripts' text), packages ``a``, ``b`` and ``c``."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "test", tmp_path / ".ci" / "test")
    (tmp_path / ".ci" / "wheels").write_text(wheels, encoding="utf-8")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "gpu_call_smoke.sh").write_text(gpu_smoke, encoding="utf-8")
    for name in ("a", "b", "c"):
        (tmp_path / "packages" / name).mkdir(parents=True)
        (tmp_path / "packages" / name / "pyproject.toml").write_text(
            f'[project]\nname = "sts-{name}"\n', encoding="utf-8"
        )
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "uv").write_text(uv, encoding="utf-8")
    (tools / "uv").chmod(0o755)
    return subprocess.run(
        ["bash", str(tmp_path / ".ci" / "test")],
        env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", **environment},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_package_suites_run_two_at_a_time_and_a_failed_one_fails_the_run(tmp_path) -> None:
    """.ci/test's installed-package suites run in the background, two at a time: each
    suite's output is shown whole in the packages' order, and one that fails is named and
    fails the run (a stand-in for uv and .ci/wheels; the other suites pass)."""
    done = run_stand_in_ci(
        tmp_path,
        wheels='[ "$1" = build ] && exit 0\necho "installing $3"; sleep 1\n'
        '[ "$3" = b ] && { echo "b fails"; exit 1; }\necho "$3 ok"\n',
        gpu_smoke="exit 0\n",
        uv="#!/bin/sh\nexit 0\n",
        environment={"STS_SKIP_WHEELS": "0"},
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "::: failed: sts-b installed from the wheels" in out
    assert "::: failed: sts-a" not in out and "::: failed: sts-c" not in out
    order = [out.index(f"installing {name}") for name in ("a", "b", "c")]
    assert order == sorted(order) and out.index("b fails") < out.index("installing c")


def test_the_gpu_smoke_runs_beside_the_core_suite_and_its_failure_fails_the_run(
    tmp_path,
) -> None:
    """With the benchmark data, the GPU call's smoke run starts in the background before
    the core suite, on one torch thread, and runs while it runs (the stand-in core suite
    waits for the smoke's start); its output is shown whole after the core suite's, the
    cross-package suite reads its reports, and its failure is named and fails the run."""
    started = tmp_path / "smoke-started"
    done = run_stand_in_ci(
        tmp_path,
        wheels="exit 0\n",
        gpu_smoke=f'touch {started}; echo "smoke on $OMP_NUM_THREADS thread"; sleep 1\n'
        'echo "smoke ends"; exit 1\n',
        uv="#!/bin/sh\n"
        'case "$*" in\n'
        f"  *shared/tests*) for i in $(seq 100); do [ -f {started} ] && break; sleep 0.1; done\n"
        f'    [ -f {started} ] && echo "core ran beside the smoke";;\n'
        '  *"-m not launch"*) echo "cross reads ${STS_GPU_CHECK_DIR:-no reports}";;\n'
        "esac\nexit 0\n",
        environment={"STS_SKIP_WHEELS": "0", "STS_DATA_DIR": str(tmp_path)},
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "core ran beside the smoke" in out
    assert out.index("::: sts-core (shared/tests): exit 0") < out.index("smoke on 1 thread")
    assert out.index("smoke ends") < out.index("::: tests: cross-package")
    assert re.search(r"cross reads \S+/gpu-check\n", out)
    assert "::: failed: the GPU call in CPU smoke mode (the GPU machine's versions)" in out
    assert out.count("::: failed:") == 1


def test_the_launches_run_beside_the_package_suites_and_their_failure_fails_the_run(
    tmp_path,
) -> None:
    """The launch suite starts after the cross-package suite and shares the two slots with
    the installed-package suites (the stand-in launches wait for the first package's
    start); its output comes first when all have ended, and its failure is named."""
    started = tmp_path / "a-started"
    done = run_stand_in_ci(
        tmp_path,
        wheels=f'[ "$1" = build ] && exit 0\n[ "$3" = a ] && touch {started}\necho "$3 ok"\n',
        gpu_smoke="exit 0\n",
        uv="#!/bin/sh\n"
        'case "$*" in\n'
        f"  *'-m launch'*) for i in $(seq 100); do [ -f {started} ] && break; sleep 0.1; done\n"
        f'    [ -f {started} ] && echo "launches ran beside a"; exit 1;;\n'
        "esac\nexit 0\n",
        environment={"STS_SKIP_WHEELS": "0"},
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "launches ran beside a" in out
    assert out.index("launches ran beside a") < out.index("a ok") < out.index("c ok")
    assert "::: failed: cross-package launches (tests -m launch, one at a time)" in out
    assert out.count("::: failed:") == 1


def test_mypy_runs_beside_the_tests_and_its_failure_fails_the_run(tmp_path) -> None:
    """.ci/run starts mypy in the background before the tests (the stand-in mypy waits for
    the stand-in tests' start, so the two run at once); its output comes after the tests'
    and its failure fails the run, as a failed test suite does."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    started = tmp_path / "tests-started"
    (tmp_path / ".ci" / "test").write_text(f'touch {started}; echo "tests ran"\n', encoding="utf-8")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "uv").write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *mypy*) for i in $(seq 100); do [ -f {started} ] && break; sleep 0.1; done\n"
        f'    [ -f {started} ] && echo "mypy ran beside the tests"; echo "mypy error"; exit 1;;\n'
        "esac\nexit 0\n",
        encoding="utf-8",
    )
    (tools / "uv").chmod(0o755)
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert out.index("tests ran") < out.index("mypy ran beside the tests") < out.index("mypy error")
    assert "::: .ci/run failed (tests: exit 0, mypy: exit 1)" in out
