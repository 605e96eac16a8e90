"""Mutation testing of the loss, training, evaluation and method-package modules (mutmut).

Not run in CI: it is slow (see the Tests section of the README). It never touches the
checkout it is started from: the mutants are made and tested in a scratch tree, an export of
HEAD with its own virtual environment (``uv sync --frozen`` plus mutmut), or in a tree given
with ``--tree`` (any checkout with a synced ``.venv``; mutmut is installed there if missing).

mutmut 3 copies each workspace member's ``src/`` to ``<member>/mutants/``, puts every mutant
of a function behind a trampoline, runs the mapped tests once to learn which tests reach which
function, then runs, per mutant, only the tests that reach it, in a process forked from a
warm interpreter (torch is imported once, not once per mutant).

    uv run python tools/mutation.py --list                  # mutants per module, no tests run
    uv run python tools/mutation.py                         # the full pass (hours)
    uv run python tools/mutation.py --modules shared/src/sts_core/losses/combined.py \\
        --tree /tmp/mut --results /tmp/mutation

The report is ``<results>/mutation.json`` and ``<results>/mutation.md`` (the tally per
module and the diff of every surviving mutant); mutmut's own output is in
``<results>/logs/``. The exit status is 0 whatever survives; 1 only when the tooling failed
(a member's clean test run failed, mutmut crashed, a module does not exist).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

MUTMUT = "mutmut==3.8.1"
REPO = Path(__file__).resolve().parents[1]

#: the method packages (folders of packages/ with a pyproject.toml)
PACKAGES = tuple(
    sorted(p.name for p in (REPO / "packages").iterdir() if (p / "pyproject.toml").is_file())
)


def package_mutation_modules(package: str) -> dict[str, list[str]]:
    """The modules a package mutation-tests beside its loss and config, each with the tests
    that cover it, repo-relative: ``[tool.sts-repository] mutation`` in its pyproject.toml
    (paths there are relative to the package folder)."""
    folder = f"packages/{package}"
    with open(REPO / folder / "pyproject.toml", "rb") as file:
        table = tomllib.load(file).get("tool", {}).get("sts-repository", {})
    return {
        f"{folder}/{module}": [f"{folder}/{test}" for test in tests]
        for module, tests in table.get("mutation", {}).items()
    }


#: every package's extra modules: module -> its tests
PACKAGE_MODULES = {
    module: tests
    for package in PACKAGES
    for module, tests in package_mutation_modules(package).items()
}

#: The modules of issue 31 and those added since; a folder stands for the ``*.py`` files in it.
DEFAULT_MODULES = [
    "shared/src/sts_core/losses",
    "shared/src/sts_core/training/averaging.py",
    "shared/src/sts_core/training/distill.py",
    "shared/src/sts_core/training/grad_cache.py",
    "shared/src/sts_core/training/loss_parts.py",
    "shared/src/sts_core/training/sampler.py",
    "shared/src/sts_core/training/batches.py",
    "shared/src/sts_core/training/optimization.py",
    "shared/src/sts_core/data/arrow_checks.py",
    "shared/src/sts_core/data/scratch.py",
    "shared/src/sts_core/data/columns.py",
    "shared/src/sts_core/training/streaming.py",
    "shared/src/sts_core/evaluation",
    "shared/src/sts_core/soup.py",
    "shared/src/sts_core/mining.py",
    "shared/src/sts_core/cross_encoder.py",
    "shared/src/sts_core/search/select.py",
    "shared/src/sts_core/search/spec.py",
    "shared/src/sts_core/search/soups.py",
    "shared/src/sts_core/search/stages.py",
    "shared/src/sts_core/search/peer_teacher.py",
    "shared/src/sts_core/search/peers.py",
    *(f"packages/{m}/src/sts_{m}/{f}.py" for m in PACKAGES for f in ("loss", "config")),
    *PACKAGE_MODULES,
]

# A mapped test file that is absent from the tree is skipped (with a note).
_WIRING = "shared/tests/test_wiring_values.py"
_PACKAGE_VALUES = [
    "packages/{pkg}/tests/test_wiring_values.py",
    "packages/{pkg}/tests/test_end_to_end_value.py",
]

#: Module pattern (fnmatch, repo-relative) -> the test files that cover it. ``{pkg}`` is the
#: package folder of the module. Tests of another member are staged into the member's copy.
#: mutmut runs, per mutant, only those of these tests that reach the mutated function.
TESTS: list[tuple[str, list[str]]] = [
    (
        "shared/src/sts_core/losses/*",
        [
            "shared/tests/test_losses.py",
            "shared/tests/test_combined_losses.py",
            "shared/tests/test_loss_settings_and_messages.py",
            "shared/tests/test_loss_packages.py",
            "shared/tests/test_single_sentence_training.py",
            "shared/tests/test_head_losses_and_backbone_options.py",
            "shared/tests/test_checks_found_by_mutation.py",
            "shared/tests/test_matryoshka.py",
            "shared/tests/test_matryoshka_wrapper.py",
            _WIRING,
        ],
    ),
    (
        "shared/src/sts_core/training/averaging.py",
        [
            "shared/tests/test_weight_averaging.py",
            "shared/tests/test_averaging.py",
            "shared/tests/test_soup.py",
            _WIRING,
        ],
    ),
    (
        "shared/src/sts_core/training/distill.py",
        [
            "shared/tests/test_distillation.py",
            "shared/tests/test_distill_checks_and_neighbours.py",
            "shared/tests/test_cross_encoder_teacher.py",
            "shared/tests/test_checks_found_by_mutation.py",
            _WIRING,
        ],
    ),
    (
        "shared/src/sts_core/training/grad_cache.py",
        [
            "shared/tests/test_grad_cache_prompts_and_test_pairs.py",
            "shared/tests/test_epoch_batches_and_grad_cache.py",
            "shared/tests/test_grad_cache_token_rule.py",
            "shared/tests/test_checks_found_by_mutation.py",
            "packages/pcctuning/tests/test_loss.py",
            _WIRING,
        ],
    ),
    (
        "shared/src/sts_core/training/sampler.py",
        [
            "shared/tests/test_sampler.py",
            "shared/tests/test_epoch_batches_and_grad_cache.py",
            "shared/tests/test_checks_found_by_mutation.py",
        ],
    ),
    (
        "shared/src/sts_core/training/optimization.py",
        [
            "shared/tests/test_parameter_groups.py",
            "shared/tests/test_losses.py",
            "shared/tests/test_option_ranges.py",
            "shared/tests/test_head_losses_and_backbone_options.py",
        ],
    ),
    (
        "shared/src/sts_core/evaluation/*",
        [
            "shared/tests/test_metrics.py",
            "shared/tests/test_evaluation_sts.py",
            "shared/tests/test_pair_evaluator.py",
            "shared/tests/test_pair_tasks.py",
            "shared/tests/test_grad_cache_prompts_and_test_pairs.py",
            "shared/tests/test_sentence_edits.py",
            "shared/tests/test_metrics_messages_and_ties.py",
            "shared/tests/test_sts_report.py",
            "shared/tests/test_pair_tasks_refusals_and_cutoffs.py",
            "shared/tests/test_pair_scorers.py",
            "shared/tests/test_checks_found_by_mutation.py",
            _WIRING,
        ],
    ),
    (
        "shared/src/sts_core/soup.py",
        [
            "shared/tests/test_soup.py",
            "shared/tests/test_soup_command.py",
            "shared/tests/test_averaging.py",
            "shared/tests/test_checks_found_by_mutation.py",
        ],
    ),
    (
        "shared/src/sts_core/training/loss_parts.py",
        ["shared/tests/test_training_host_syncs.py"],
    ),
    (
        "shared/src/sts_core/mining.py",
        [
            "shared/tests/test_mining.py",
            "shared/tests/test_mining_values.py",
            "shared/tests/test_mining_api.py",
        ],
    ),
    (
        "shared/src/sts_core/cross_encoder.py",
        [
            "shared/tests/test_cross_encoder.py",
            "shared/tests/test_cross_encoder_teacher.py",
            "shared/tests/test_pair_scorers.py",
            "shared/tests/test_pair_evaluator.py",
            "packages/cosent/tests/test_cross_encoder.py",
        ],
    ),
    (
        "shared/src/sts_core/search/*",
        [
            "shared/tests/test_search_selection.py",
            "shared/tests/test_search_spec.py",
            "shared/tests/test_search_platform.py",
        ],
    ),
    ("shared/src/sts_core/search/soups.py", ["shared/tests/test_search_soup.py"]),
    ("shared/src/sts_core/search/stages.py", ["shared/tests/test_search_stages.py"]),
    (
        "shared/src/sts_core/search/peer*.py",
        [
            "shared/tests/test_search_peer_teacher_step.py",
            "shared/tests/test_search_in_batch_rows.py",
            "shared/tests/test_search_peer_rows.py",
        ],
    ),
    (
        "packages/*/src/*/loss.py",
        [
            "packages/{pkg}/tests/test_loss.py",
            "packages/{pkg}/tests/test_loss_settings.py",
            *_PACKAGE_VALUES,
        ],
    ),
    (
        "packages/*/src/*/config.py",
        [
            "packages/{pkg}/tests/test_option_ranges.py",
            "packages/{pkg}/tests/test_train_main.py",
            *_PACKAGE_VALUES,
        ],
    ),
    *(
        (module, [*tests, "packages/{pkg}/tests/test_train_main.py", *_PACKAGE_VALUES])
        for module, tests in PACKAGE_MODULES.items()
    ),
    (
        "shared/src/sts_core/data/arrow_checks.py",
        [
            "shared/tests/test_arrow_checks.py",
            "shared/tests/test_scratch.py",
            "shared/tests/test_data_tables.py",
            "shared/tests/test_table_labels.py",
        ],
    ),
    (
        "shared/src/sts_core/training/batches.py",
        [
            "shared/tests/test_batches.py",
            "shared/tests/test_batch_plan.py",
            "shared/tests/test_sampler.py",
        ],
    ),
    (
        "shared/src/sts_core/data/scratch.py",
        [
            "shared/tests/test_scratch.py",
            "shared/tests/test_arrow_checks.py",
            "shared/tests/test_data_filtering.py",
        ],
    ),
    (
        "shared/src/sts_core/data/columns.py",
        [
            "shared/tests/test_batch_plan.py",
            "shared/tests/test_data_filtering.py",
            "shared/tests/test_multi_dataset.py",
            "shared/tests/test_table_labels.py",
        ],
    ),
    (
        "shared/src/sts_core/training/streaming.py",
        ["shared/tests/test_streaming.py"],
    ),
]

#: Tests that cannot pass inside mutmut's copy of a member (``<member>/mutants/``) -> why.
DESELECT: dict[str, str] = {
    "packages/cosent/tests/test_train_main.py::test_recipe_opens_with_its_launch_command": (
        "looks for accelerate_configs/ two folders above the package, outside the copy"
    ),
    "shared/tests/test_option_ranges.py::"
    "test_a_mapping_pattern_that_matches_no_parameter_stops_the_run_with_one_line": (
        "in mutmut's one process, a logging handler an earlier test left behind writes to a "
        "closed stream, and this test checks that standard error holds no traceback"
    ),
    # Two gloo processes: 7 s per mutant of the loss function they reach, where the
    # one-process tests of the same function take well under a second. The gathering they
    # check is also run by the cross-package launch tests; its mutants may survive here.
    "packages/bsc/tests/test_loss.py::test_gathered_loss_on_two_processes_equals_one_process": (
        "spawns two processes (7 s a mutant)"
    ),
    "packages/pcctuning/tests/test_loss.py::"
    "test_gathered_losses_on_two_processes_equal_one_process_over_the_whole_batch": (
        "spawns two processes (7 s a mutant)"
    ),
}

#: Surviving mutants judged equivalent (no test can tell them from the original), by the key
#: the report prints for each survivor -> why (``tools/mutation_equivalents.json``, one
#: entry per mutant, reviewed by hand). They are tallied as "equivalent".
EQUIVALENTS_FILE = Path(__file__).with_name("mutation_equivalents.json")
EQUIVALENT: dict[str, str] = json.loads(EQUIVALENTS_FILE.read_text(encoding="utf-8"))

#: mutmut's status -> the report's column.
COLUMN = {
    "killed": "killed",
    "caught by type check": "killed",
    "timeout": "timeout",
    "survived": "surviving",
    "no tests": "no tests",
}
COLUMNS = ["killed", "timeout", "equivalent", "surviving", "no tests", "other"]
STAGED = "_mutation_tests"  # other members' tests, copied into the member under test
SPINNER = tuple("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # mutmut's progress frames, thinned out of the logs

# Run inside the tree's environment, in a member folder: each module's mutants, their status
# and, for those not killed, their diff. Reads {"modules": [...], "diffs": bool} on stdin.
_COLLECT = """
import json, sys
from pathlib import Path
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
request = json.load(sys.stdin)
out = {}
for module in request["modules"]:
    meta = Path("mutants") / (module + ".meta")
    codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    rows = out[module] = []
    for name, code in codes.items():
        status = status_by_exit_code[code]
        diff = None
        if status not in ("killed", "caught by type check"):
            try:
                diff = get_diff_for_mutant(name, path=module)
            except Exception as error:
                diff = f"(mutmut could not show it: {error!r})"
        rows.append({"name": name, "status": status, "exit_code": code, "diff": diff})
json.dump(out, sys.stdout)
"""

# Run with mutmut importable, in a folder holding a stub setup.cfg: mutants per file.
_COUNT = """
import json, sys
from pathlib import Path
from mutmut.mutation.file_mutation import mutate_file_contents
paths = json.load(sys.stdin)
json.dump({p: len(mutate_file_contents(p, Path(f).read_text()).mutant_names)
           for p, f in paths.items()}, sys.stdout)
"""


@dataclass
class Member:
    """A workspace member (``shared`` or ``packages/<m>``) and the modules of it under test."""

    root: str
    modules: list[str] = field(default_factory=list)

    def src_relative(self, module: str) -> str:
        """``src/...`` path of a module, as mutmut names it inside the member."""
        return module[len(self.root) + 1 :]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modules",
        nargs="+",
        metavar="PATH",
        help="repo-relative files or folders (default: the issue-31 list)",
    )
    parser.add_argument("--list", action="store_true", help="only count the mutants per module")
    parser.add_argument(
        "--tree", type=Path, help="reuse this checkout and its .venv instead of a scratch tree"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where to make the scratch tree, or the one to reuse (default: a new temp dir)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=REPO / "benchmarks/results/mutation",
        help="report folder (default: benchmarks/results/mutation/)",
    )
    parser.add_argument(
        "--reclassify",
        action="store_true",
        help="no run: re-tally <results>/mutation.json with the current equivalents list "
        "(after reviewing survivors) and rewrite mutation.md",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutmut workers (default 1)")
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=10.0,
        help="a mutant times out after (its tests' clean time + constant) x this (default 10)",
    )
    parser.add_argument("--timeout-constant", type=float, default=5.0, help="seconds (default 5)")
    return parser.parse_args(argv)


def sh(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a command, failing loudly."""
    return subprocess.run(cmd, check=True, **kwargs)


def head_commit(repo: Path) -> str:
    """The commit a tree is at ("unknown" outside git)."""
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


EXPORTED_COMMIT = ".mutation-commit"  # in a scratch tree: the commit it was exported from


def export_head(dest: Path) -> None:
    """Write HEAD's files (no .git, no uncommitted edits) into ``dest``, and which commit
    they are (``EXPORTED_COMMIT``: the checkout's HEAD may move while the run goes on)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / EXPORTED_COMMIT).write_text(head_commit(REPO) + "\n", encoding="utf-8")
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", "HEAD"], stdout=subprocess.PIPE)
    sh(["tar", "-x", "-C", str(dest)], stdin=archive.stdout)
    if archive.wait() != 0:
        raise RuntimeError("git archive HEAD failed")


def tree_commit(tree: Path) -> str:
    """The commit a scratch tree was exported from, or a checkout's HEAD."""
    exported = tree / EXPORTED_COMMIT
    if exported.is_file():
        return exported.read_text(encoding="utf-8").strip()
    return head_commit(tree)


def uv_env(tree: Path) -> dict[str, str]:
    """The environment that points uv and Python at the tree's own venv."""
    env = dict(os.environ)
    env["UV_PROJECT_ENVIRONMENT"] = str(tree / ".venv")
    env["VIRTUAL_ENV"] = str(tree / ".venv")
    env["PATH"] = f"{tree / '.venv/bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def ensure_mutmut(tree: Path) -> None:
    """Install mutmut into the tree's venv unless it is there."""
    python = str(tree / ".venv/bin/python")
    if subprocess.run([python, "-c", "import mutmut"], capture_output=True).returncode:
        sh(["uv", "pip", "install", "--python", python, MUTMUT], env=uv_env(tree))


def prepare_tree(args: argparse.Namespace) -> Path:
    """The tree to mutate: ``--tree``, or a fresh export of HEAD with a synced venv."""
    if args.tree:
        tree = args.tree.resolve()
        if not (tree / ".venv/bin/python").exists():
            raise RuntimeError(f"{tree} has no .venv (run `uv sync` there)")
    else:
        base = args.workdir.resolve() if args.workdir else Path(tempfile.mkdtemp())
        tree = base / "tree"
        if not tree.exists():
            print(f"exporting HEAD to {tree} and syncing its venv", flush=True)
            export_head(tree)
        sh(["uv", "sync", "--frozen", "--inexact", "--quiet"], cwd=tree, env=uv_env(tree))
    ensure_mutmut(tree)
    return tree


def expand_modules(tree: Path, specs: list[str]) -> list[str]:
    """Repo-relative ``.py`` paths: folders become their files; missing paths fail."""
    modules: list[str] = []
    for spec in specs:
        path = tree / spec.rstrip("/")
        if path.is_dir():
            modules += sorted(str(p.relative_to(tree)) for p in path.glob("*.py"))
        elif path.suffix == ".py" and path.is_file():
            modules.append(str(path.relative_to(tree)))
        else:
            raise FileNotFoundError(f"no such module in {tree}: {spec}")
    return list(dict.fromkeys(modules))


def member_root(module: str) -> str:
    """``shared`` or ``packages/<m>`` for a repo-relative module path."""
    parts = Path(module).parts
    if parts[0] == "shared":
        return "shared"
    if parts[0] == "packages" and len(parts) > 3:
        return f"packages/{parts[1]}"
    raise ValueError(f"{module} is in no workspace member")


def group_by_member(modules: list[str]) -> list[Member]:
    """The modules, grouped by the member whose mutmut run tests them."""
    members: dict[str, Member] = {}
    for module in modules:
        root = member_root(module)
        members.setdefault(root, Member(root)).modules.append(module)
    return list(members.values())


def tests_for(module: str) -> list[str]:
    """The repo-relative test files mapped to a module (the TESTS table)."""
    pkg = Path(module).parts[1] if module.startswith("packages/") else ""
    tests: list[str] = []
    for pattern, files in TESTS:
        if fnmatch.fnmatch(module, pattern):
            tests += [f.format(pkg=pkg) for f in files]
    return list(dict.fromkeys(tests))


def count_mutants(tree: Path, modules: list[str]) -> dict[str, int]:
    """Mutants mutmut makes of each module (no tests run)."""
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "setup.cfg").write_text("[mutmut]\nsource_paths = .\n")
        paths = {f"{Member(member_root(m)).src_relative(m)}": str(tree / m) for m in modules}
        python = tree / ".venv/bin/python"
        if (
            python.exists()
            and not subprocess.run(
                [str(python), "-c", "import mutmut"], capture_output=True
            ).returncode
        ):
            cmd = [str(python), "-c", _COUNT]
        else:
            cmd = [
                "uv",
                "run",
                "--quiet",
                "--isolated",
                "--no-project",
                "--with",
                MUTMUT,
                "python",
                "-c",
                _COUNT,
            ]
        done = sh(cmd, cwd=scratch, input=json.dumps(paths), capture_output=True, text=True)
    counts = json.loads(done.stdout)
    return {m: counts[Member(member_root(m)).src_relative(m)] for m in modules}


def stage_tests(tree: Path, member: Member, tests: list[str]) -> dict[str, str]:
    """Repo-relative test path -> member-relative; another member's tests folder is copied
    into the member first (mutmut runs only the tests inside the member's copy)."""
    staged: dict[str, str] = {}
    for test in tests:
        if not (tree / test).exists():
            print(f"  (no {test} in this tree: skipped)", flush=True)
        elif test.startswith(member.root + "/"):
            staged[test] = test[len(member.root) + 1 :]
        else:
            other = member_root(test)
            target = tree / member.root / STAGED / Path(other).name / "tests"
            if not target.exists():
                shutil.copytree(tree / other / "tests", target)
            staged[test] = f"{STAGED}/{Path(other).name}/{Path(test).relative_to(other)}"
    return staged


def deselect_args(staged: dict[str, str]) -> list[str]:
    """``--deselect`` for the DESELECT tests among the staged files."""
    args: list[str] = []
    for node in DESELECT:
        path, _, rest = node.partition("::")
        if path in staged:
            args += ["--deselect", f"{staged[path]}::{rest}"]
    return args


def cfg_list(key: str, values: list[str]) -> str:
    """A multi-line setup.cfg entry."""
    return f"{key} =\n" + "".join(f"    {v}\n" for v in values)


def write_config(
    tree: Path, member: Member, staged: dict[str, str], args: argparse.Namespace
) -> None:
    """The member's ``setup.cfg`` [mutmut] section for this run."""
    root = tree / member.root
    skip = {"src", "tests", "mutants", "setup.cfg", ".venv", "__pycache__"}
    also_copy = sorted(p.name for p in root.iterdir() if p.name not in skip)
    pytest_args = ["-p", "no:cacheprovider", *deselect_args(staged)]
    text = "[mutmut]\nsource_paths = src\n"
    text += cfg_list("only_mutate", [member.src_relative(m) for m in member.modules])
    text += cfg_list("pytest_add_cli_args_test_selection", list(staged.values()))
    text += cfg_list("also_copy", also_copy) if also_copy else ""
    text += cfg_list("pytest_add_cli_args", pytest_args)
    text += f"timeout_multiplier = {args.timeout_multiplier}\n"
    text += f"timeout_constant = {args.timeout_constant}\n"
    (root / "setup.cfg").write_text(text)


def run_member(tree: Path, member: Member, args: argparse.Namespace, log: Path) -> dict:
    """mutmut over one member's modules; its results per module, or the error."""
    tests = [t for m in member.modules for t in tests_for(m)]
    root = tree / member.root
    shutil.rmtree(root / "mutants", ignore_errors=True)
    shutil.rmtree(root / STAGED, ignore_errors=True)
    staged = stage_tests(tree, member, list(dict.fromkeys(tests)))
    if not staged:
        return {"error": "no test file mapped to these modules", "modules": {}}
    write_config(tree, member, staged, args)
    # mutmut ends each mutant's process with os._exit, so no exit handler runs there: the
    # temporary folders those processes make (a table's scratch folder) go in this one,
    # removed after the run
    temporary = Path(tempfile.mkdtemp(prefix="sts-mutation-tmp-"))
    env = uv_env(tree) | {
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TMPDIR": str(temporary),
    }
    cmd = [str(tree / ".venv/bin/python"), "-m", "mutmut", "run", "--max-children", str(args.jobs)]
    print(f"{member.root}: {len(member.modules)} modules; tests: {' '.join(staged)}", flush=True)
    start = time.monotonic()
    try:
        with log.open("w") as out:
            run = subprocess.run(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    rc = run.returncode
    seconds = time.monotonic() - start
    tidy_log(log)
    error = None if rc == 0 else f"mutmut exited {rc}: see {log}"
    try:
        results = collect(tree, member)
    except subprocess.CalledProcessError as failure:
        results, error = {}, f"reading mutmut's results failed: {failure.stderr}"
    return {"seconds": round(seconds, 1), "tests": list(staged), "error": error, "modules": results}


def tidy_log(log: Path) -> None:
    """mutmut's log without its progress frames, but the last of each run of them."""
    frames = [f for f in re.split(r"[\r\n]+", log.read_text(errors="replace")) if f.strip()]
    kept = [
        f
        for f, after in zip(frames, [*frames[1:], ""], strict=True)
        if not (f.startswith(SPINNER) and after.startswith(SPINNER))
    ]
    log.write_text("\n".join(kept) + "\n")


def collect(tree: Path, member: Member) -> dict[str, list[dict]]:
    """Each module's mutants (name, status, diff of those not killed), via mutmut's API."""
    request = {"modules": [member.src_relative(m) for m in member.modules]}
    done = sh(
        [str(tree / ".venv/bin/python"), "-c", _COLLECT],
        cwd=tree / member.root,
        env=uv_env(tree),
        input=json.dumps(request),
        capture_output=True,
        text=True,
    )
    rows = json.loads(done.stdout)
    return {m: rows[member.src_relative(m)] for m in member.modules}


def readable_function(mutant: str) -> str:
    """``pkg.mod.xǁClassǁmethod__mutmut_3`` -> ``Class.method``; ``x_f__mutmut_1`` -> ``f``."""
    mangled = mutant.partition("__mutmut_")[0].rpartition(".")[2]
    if "ǁ" in mangled:
        return ".".join(p for p in mangled.split("ǁ")[1:] if p)
    return mangled.removeprefix("x_")


def equivalence_key(module: str, row: dict) -> str:
    """A survivor's key for EQUIVALENT: module, function, and the changed lines."""
    lines = (row.get("diff") or "").splitlines()
    removed = [x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++")]
    function = readable_function(row["name"])
    return f"{module}:{function}: {' / '.join(removed)} => {' / '.join(added)}"


def classify(module: str, rows: list[dict]) -> Counter:
    """The report's columns for one module (rows get their column and key)."""
    tally: Counter = Counter(mutants=len(rows))
    for row in rows:
        column = COLUMN.get(row["status"], "other")
        if column in ("surviving", "no tests", "other"):
            row["key"] = equivalence_key(module, row)
            if row["key"] in EQUIVALENT:
                column, row["reason"] = "equivalent", EQUIVALENT[row["key"]]
        row["column"] = column
        tally[column] += 1
    return tally


def markdown(report: dict) -> str:
    """The tally table and each survivor's diff."""
    head = ["module", "mutants", *COLUMNS]
    lines = [
        f"# Mutation testing ({report['tool']})",
        "",
        f"Commit `{report['commit']}`, {report['finished']}, "
        f"{report['seconds']:.0f} s in all ({report['seconds_per_mutant']:.2f} s per mutant, "
        f"{report['jobs']} worker"
        + (f"; equivalents re-tallied {report['reclassified']}" if "reclassified" in report else "")
        + "). `surviving`: the tests pass with the mutant; `no tests`: no "
        "mapped test reaches the function; `equivalent`: listed in tools/mutation_equivalents.json "
        "with the reason.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for module, entry in report["modules"].items():
        t = entry["tally"]
        lines.append(f"| {module} | " + " | ".join(str(t.get(c, 0)) for c in head[1:]) + " |")
    total = report["total"]
    lines.append("| **total** | " + " | ".join(str(total.get(c, 0)) for c in head[1:]) + " |")
    for member, error in report["errors"].items():
        lines += ["", f"**{member} failed**: {error}"]
    lines += ["", "## Not killed", ""]
    for module, entry in report["modules"].items():
        rows = [r for r in entry["mutants"] if r["column"] not in ("killed", "timeout")]
        if rows:
            lines += [f"### {module} (tests: {', '.join(entry['tests'])})", ""]
        for row in rows:
            why = f" — equivalent: {row['reason']}" if "reason" in row else ""
            lines += [
                f"`{row['name']}` ({row['status']}){why}  ",
                f"key: `{row['key']}`",
                "",
                "```diff",
                (row["diff"] or "").strip(),
                "```",
                "",
            ]
    return "\n".join(lines) + "\n"


def build_report(
    args: argparse.Namespace, tree: Path, runs: dict[str, dict], seconds: float
) -> dict:
    """The JSON report: the tally per module and in all, every mutant, the errors."""
    modules: dict[str, dict] = {}
    total: Counter = Counter()
    for run in runs.values():
        for module, rows in run["modules"].items():
            tally = classify(module, rows)
            total += tally
            tests = [t for t in tests_for(module) if t in run["tests"]]
            modules[module] = {"tally": dict(tally), "tests": tests, "mutants": rows}
    tried = total.get("mutants", 0)
    return {
        "tool": MUTMUT,
        "commit": tree_commit(tree),
        "tree": str(tree),
        "jobs": args.jobs,
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(seconds, 1),
        "seconds_per_mutant": seconds / tried if tried else 0.0,
        "member_seconds": {k: v.get("seconds") for k, v in runs.items()},
        "total": dict(total),
        "modules": modules,
        "errors": {k: v["error"] for k, v in runs.items() if v.get("error")},
    }


def list_mutants(tree: Path, modules: list[str]) -> None:
    """Print the mutants per module and their mapped tests."""
    counts = count_mutants(tree, modules)
    print("| module | mutants | tests |\n|---|---|---|")
    for module, n in counts.items():
        print(f"| {module} | {n} | {', '.join(tests_for(module)) or '(none)'} |")
    print(f"| **total** | {sum(counts.values())} | |")


def main(argv: list[str] | None = None) -> int:
    """Count or run; 0 unless the tooling failed."""
    args = parse_args(argv)
    try:
        return run(args)
    except (OSError, RuntimeError, ValueError, subprocess.CalledProcessError) as error:
        print(f"tools/mutation.py: {error}", file=sys.stderr)
        return 1


def reclassify(results: Path) -> dict:
    """The report in ``results`` re-tallied with the current :data:`EQUIVALENT` (each
    mutant's mutmut status is kept; only the equivalent/surviving split changes)."""
    report = json.loads((results / "mutation.json").read_text(encoding="utf-8"))
    total: Counter = Counter()
    for module, entry in report["modules"].items():
        for row in entry["mutants"]:
            row.pop("reason", None)
        tally = classify(module, entry["mutants"])
        entry["tally"] = dict(tally)
        total += tally
    report["total"] = dict(total)
    report["reclassified"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return report


def write_report(report: dict, results: Path) -> None:
    """``mutation.json`` and ``mutation.md`` in ``results``."""
    (results / "mutation.json").write_text(json.dumps(report, indent=1) + "\n")
    (results / "mutation.md").write_text(markdown(report))
    print(markdown(report).split("\n## Not killed")[0])


def run(args: argparse.Namespace) -> int:
    """The work of :func:`main`."""
    if args.reclassify:
        write_report(reclassify(args.results), args.results)
        return 0
    if args.list and not args.tree:
        with tempfile.TemporaryDirectory() as scratch:
            export_head(Path(scratch))
            list_mutants(
                Path(scratch), expand_modules(Path(scratch), args.modules or DEFAULT_MODULES)
            )
        return 0
    tree = prepare_tree(args)
    modules = expand_modules(tree, args.modules or DEFAULT_MODULES)
    if args.list:
        list_mutants(tree, modules)
        return 0
    (args.results / "logs").mkdir(parents=True, exist_ok=True)
    start, runs = time.monotonic(), {}
    for member in group_by_member(modules):
        log = args.results / "logs" / f"{member.root.replace('/', '_')}.log"
        runs[member.root] = run_member(tree, member, args, log)
    report = build_report(args, tree, runs, time.monotonic() - start)
    write_report(report, args.results)
    print(f"report: {args.results / 'mutation.md'}; mutmut left its state in {tree}")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
