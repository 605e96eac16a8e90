"""Every console script of the method packages and every benchmark script against the same
output cases as sts-core's own (``shared/tests/test_command_files.py``, issue 61, item 1).

Each script declares what it reads and writes before any work
(:mod:`sts_core.command_files`; the benchmarks through ``_common.ScriptFiles``). For each
one, an output that is an input file, lies inside an input folder, is (or sits among) a
model's files, is a link to an input, or is an existing file sts-core did not write is
refused: exit status 2, one error line naming the path, no traceback, every input and the
foreign file byte-identical after, before any model loads (``no_model_loading``). The
benchmarks and the two tools refuse before any data is read (the data folder holds one
small table: a script that read it would fail otherwise, with another line), the training
scripts too (``sts_core.training.run.TrainingRun.check`` checks the output folder first).

The scripts come from the installed distributions (the ``console_scripts`` of every
distribution that declares a method) and from ``benchmarks/*.py`` with a ``main``: a new
script without its cases here fails :func:`test_every_script_has_its_cases`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_support import REPO, load_benchmark_module, load_benchmark_script

from sts_core.command_files import LEDGER_NAME, read_ledger, set_command, written_by_project
from sts_core.testing import make_tiny_bert
from sts_core.testing.option_checks import refused_leaving

pytestmark = pytest.mark.usefixtures("torch_one_thread")
common = load_benchmark_module("_common")  # as the scripts import it (their BenchmarkError)


def core_cases() -> ModuleType:
    """sts-core's own cases (``shared/tests/test_command_files.py``): their workspace's
    links, foreign files and pairs are these cases' too."""
    path = REPO / "shared" / "tests" / "test_command_files.py"
    spec = importlib.util.spec_from_file_location("sts_core_command_file_cases", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


core = core_cases()
CASES = core.CASES


@dataclass
class Workspace(core.Workspace):
    """sts-core's workspace (a data folder with a pairs table, an output folder, links and
    foreign files there) with the models under a models folder (MiniLM's and mpnet's names:
    the benchmarks' defaults), a recipe, a word list and a training script."""

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def model(self) -> Path:
        return self.models / common.MINILM

    @property
    def second_model(self) -> Path:
        return self.models / common.MPNET

    @property
    def recipe(self) -> Path:
        return self.root / "recipe.yaml"

    @property
    def words(self) -> Path:
        return self.root / "words.json"  # a word list whose name an output may take

    @property
    def script(self) -> Path:
        return self.root / "train.py"

    def inputs(self) -> dict[str, str]:
        """Every input file (all but the output folder's) with its content hash."""
        found = {}
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.is_relative_to(self.out):
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found

    def state_and_folders(self) -> tuple[tuple, list[Path]]:
        """:meth:`state` and every folder under the workspace: a refused benchmark makes
        none (not even an empty one inside an input)."""
        folders = [p for p in self.root.rglob("*") if p.is_dir() and not p.is_symlink()]
        return self.state(), sorted(folders)


@pytest.fixture
def workspace(
    tiny_bert_dir: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Workspace:
    space = Workspace(tmp_path)
    shutil.copytree(tiny_bert_dir, space.model)
    make_tiny_bert(space.second_model, seed=1)
    (space.data / "senteval").mkdir(parents=True)
    space.pairs.write_text(core.PAIRS_TEXT, encoding="utf-8")
    space.words.write_text("good\nbad\n", encoding="utf-8")
    space.script.write_text("raise SystemExit(3)  # no run may start\n", encoding="utf-8")
    (space.root / "dist").mkdir()
    monkeypatch.setenv("STS_MODELS_DIR", str(space.models))
    monkeypatch.setenv("STS_DATA_DIR", str(space.data))
    # SIFTER parses its corpus into its cache before the run's output is checked (the
    # training checks the data first, then the output folder, as sts-train does)
    monkeypatch.setenv("STS_SIFTER_CACHE", str(tmp_path_factory.mktemp("sifter-cache")))
    return space


# ----------------------------------------------------------------------------- the cases
#: a case: the argv and the path the error line must name. Each builder maps the cases to
#: functions, so that only the case's own link or foreign file is made (a foreign file
#: written through another case's link would land in an input)
Case = tuple[list[str], Path]


def folder_output(space: Workspace, case: str, name: str, link_to: Path | None = None) -> Path:
    """A folder output ``name`` for ``case``: the pairs file, a folder in the model, the
    model's config, a link to ``link_to`` (default: the model), a folder holding a foreign
    file."""
    return {
        "an input file": lambda: space.pairs,
        "inside an input folder": lambda: space.model / name,
        "a model's file": lambda: space.model / "config.json",
        "a link": lambda: space.link(name, link_to or space.model),
        "foreign": lambda: space.foreign(f"{name}/notes.txt").parent,
    }[case]()  # only this case's link or foreign file is made


def train_case(space: Workspace, case: str) -> Case:
    """``sts-<method>-train --config recipe.yaml``: the core's training path."""
    output = folder_output(space, case, "run")
    space.recipe.write_text(
        f"model_name_or_path: {space.model}\ntrain_datasets: [{space.pairs}]\n"
        f"eval_dataset: {space.pairs}\nscore_range: [0, 5]\nmax_steps: 1\n"
        f"output_dir: {output}\noverwrite_output_dir: true\nreport_to: none\n",
        encoding="utf-8",
    )
    return ["--config", str(space.recipe)], output


def ceiling_case(space: Workspace, case: str) -> Case | None:
    """``sts-pcc-ceiling --json FILE`` (reads the data folder, no model)."""
    output = {
        "an input file": lambda: space.data,
        "inside an input folder": lambda: space.data / "ceilings.json",
        "a model's file": lambda: None,
        "a link": lambda: space.link("ceilings.json", space.pairs),
        "foreign": lambda: space.foreign("ceilings.json"),
    }[case]()  # only this case's link or foreign file is made
    if output is None:
        return None
    return ["--data-dir", str(space.data), "--tasks", "stsb", "--json", str(output)], output


def lstm_case(space: Workspace, case: str) -> Case:
    """``sts-sifter-lstm --output BASE`` writes BASE.json and BASE.md."""
    base = {
        "an input file": lambda: space.words.with_suffix(""),  # → words.json, the --lexicon
        "inside an input folder": lambda: space.model / "lstm",
        "a model's file": lambda: space.model / "config",  # → model/config.json
        "a link": lambda: space.link("lstm.json", space.pairs).with_suffix(""),
        "foreign": lambda: space.foreign("lstm.json").with_suffix(""),
    }[case]()  # only this case's link or foreign file is made
    argv = ["--embeddings", str(space.model), "--data-dir", str(space.data)]
    return [*argv, "--lexicon", str(space.words), "--output", str(base)], base


def results_case(stem: str, *base: str, runs_file: bool = False) -> Callable:
    """A benchmark that writes ``<output-dir>/<stem>.*``: the output folder is an input
    file, inside the model, the model's own folder, a link to the data folder, or holds a
    foreign file of that name; with ``runs_file``, ``--runs-file`` is the input file and
    the model's file."""

    def argv_of(space: Workspace, case: str) -> Case:
        if runs_file and case in ("an input file", "a model's file"):
            target = space.pairs if case == "an input file" else space.model / "config.json"
            return [*base, "--output-dir", str(space.out), "--runs-file", str(target)], target
        folder = {
            "an input file": lambda: space.pairs,
            "inside an input folder": lambda: space.model / "results",
            "a model's file": lambda: space.model,
            "a link": lambda: space.link("results", space.data),
            "foreign": lambda: space.foreign(f"{stem}.md").parent,
        }[case]()  # only this case's link or foreign file is made
        named = folder / f"{stem}.md" if case == "foreign" else folder
        return [*base, "--output-dir", str(folder)], named

    return argv_of


def search_case(space: Workspace, case: str) -> Case:
    """``quality_search.py``: its report, ``--cells`` and ``--weights-dir``."""
    argv = ["--smoke", "--in-process", "--weights-dir", str(space.root / "weights")]
    if case in ("an input file", "a model's file"):
        cells = space.pairs if case == "an input file" else space.model / "config.json"
        return [*argv, "--output-dir", str(space.out), "--cells", str(cells)], cells
    return results_case("quality_search_smoke", *argv)(space, case)


def teacher_case(space: Workspace, case: str) -> Case:
    """``quality_teacher.py --output FOLDER`` (a new folder)."""
    output = folder_output(space, case, "teacher")
    return ["--smoke", "--model", common.MINILM, "--output", str(output)], output


def recipes_case(space: Workspace, case: str) -> Case:
    """``recipes.py``: its report and the run folders under ``--keep-runs``."""
    space.recipe.write_text(f"model_name_or_path: {space.model}\n", encoding="utf-8")
    argv = ["--recipe", str(space.recipe), "--script", str(space.script), "--variant", "a="]
    argv += ["--seeds", "0"]
    if case in ("inside an input folder", "a link"):
        keep = space.model / "runs" if case != "a link" else space.link("runs", space.data)
        return [*argv, "--keep-runs", str(keep), "--output-dir", str(space.out)], keep
    return results_case("recipes", *argv)(space, case)


def bundle_case(space: Workspace, case: str) -> Case:
    """``gpu_call.py prepare --bundle FOLDER``."""
    bundle = folder_output(space, case, "bundle", link_to=space.data / "senteval")
    argv = ["prepare", "--bundle", str(bundle), "--data-dir", str(space.data)]
    return [*argv, "--models-dir", str(space.models), "--dist", str(space.root / "dist")], bundle


# ----------------------------------------------------------------------------- the scripts
def entry_point(value: str) -> Callable[[list[str]], int]:
    """The function of an entry point (``module:name``), called with ``argv``."""
    module, name = value.split(":")
    return lambda argv: getattr(importlib.import_module(module), name)(argv)


def benchmark(name: str) -> Callable[[list[str]], int]:
    """``benchmarks/<name>.py``'s main as its ``__main__`` runs it (``main_guard``, its
    folder first on the path: the modules it imports late)."""

    def run(argv: list[str]) -> int:
        main = load_benchmark_script(name).main
        sys.path.insert(0, str(REPO / "benchmarks"))
        try:
            with pytest.raises(SystemExit) as stopped:
                common.main_guard(lambda: main(argv))
        finally:
            sys.path.remove(str(REPO / "benchmarks"))
        return stopped.value.code

    return run


def package_scripts() -> dict[str, str]:
    """Console script → entry point, of every installed distribution declaring a method."""
    found = {}
    for method in importlib.metadata.entry_points(group="sts_core.methods"):
        for script in method.dist.entry_points:
            if script.group == "console_scripts":
                found[script.name] = script.value
    return found


def benchmark_scripts() -> set[str]:
    """``benchmarks/*.py`` that have a ``main``."""
    return {
        path.stem
        for path in (REPO / "benchmarks").glob("*.py")
        if re.search(r"^def main\(", path.read_text(encoding="utf-8"), re.M)
    }


#: console script of a package → its cases and the start of its error line
PACKAGE_CASES: dict[str, tuple[Callable, str]] = {
    **{f"sts-{m}-train": (train_case, "error: ") for m in ("bsc", "cosent", "pcc", "regression")},
    "sts-sifter-train": (train_case, "error: "),
    "sts-pcc-ceiling": (ceiling_case, "sts-pcc-ceiling: error: "),
    "sts-sifter-lstm": (lstm_case, "sts-sifter-lstm: error: "),
}
SMOKE_CPU = ("--smoke", "--device", "cpu")
MODEL = ("--model", common.MINILM)
WIDTHS = ("--dims", "32", "16", "--score-dims", "32")
#: benchmark script → its cases (its error line starts ``error: ``)
BENCHMARK_CASES: dict[str, Callable] = {
    "encode": results_case("encode_smoke", *SMOKE_CPU, runs_file=True),
    "train": results_case("train_smoke", *SMOKE_CPU, *MODEL, runs_file=True),
    "quality": results_case("quality_smoke", "--smoke", *MODEL),
    "pair_tasks": results_case("pair_tasks_smoke", "--smoke", *MODEL),
    # the widths within the tiny model's 32 (checked first, as the other option values)
    "matryoshka": results_case("matryoshka_smoke", "--smoke", *MODEL, *WIDTHS),
    "mine": results_case("mine_smoke", "--smoke", *MODEL),
    "data_scale": results_case("data_scale_smoke", "--smoke", *MODEL),
    "gpu_check": results_case("gpu_check_smoke", *SMOKE_CPU),
    "quality_search": search_case,
    "quality_teacher": teacher_case,
    "recipes": recipes_case,
    "gpu_call": bundle_case,
}


def test_every_script_has_its_cases() -> None:
    assert set(PACKAGE_CASES) == set(package_scripts())
    assert set(BENCHMARK_CASES) == benchmark_scripts()


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("script", sorted({*PACKAGE_CASES, *BENCHMARK_CASES}))
def test_an_output_on_an_input_or_a_foreign_file_is_refused_in_one_line(
    workspace: Workspace, capsys, script: str, case: str
) -> None:
    if script in PACKAGE_CASES:
        cases, prefix = PACKAGE_CASES[script]
        main, state = entry_point(package_scripts()[script]), workspace.state
    else:
        cases, prefix, main = BENCHMARK_CASES[script], "error: ", benchmark(script)
        state = workspace.state_and_folders  # a benchmark refuses before it makes a folder
    made = cases(workspace, case)
    if made is None:
        pytest.skip(f"{script} reads no model")
    argv, named = made
    line = refused_leaving(main, argv, capsys, prefix, state)
    assert str(named) in line, line  # refused for this output, not later


# ----------------------------------------------------------------------------- the writers
def test_a_rerun_replaces_its_own_results_and_never_a_file_sts_core_did_not_write(
    tmp_path: Path,
) -> None:
    """A benchmark's results are written atomically and recorded in the folder's ledger, so
    the next run replaces them without a flag; a result edited by hand, or a file of the
    user's, is refused before the work, and by the write itself."""
    stem = tmp_path / "results" / "quality"
    stem.parent.mkdir()
    set_command("quality.py")  # as the benchmark writes them
    common.write_json(stem, {"rows": []})
    common.write_markdown(stem, "# table")
    common.save_runs_so_far(stem.with_name("runs.json"), "runs", {"ours": [{"throughput": 1}]})
    assert set(read_ledger(stem.parent)) == {"quality.json", "quality.md", "runs.json"}

    def declared() -> common.ScriptFiles:
        files = common.ScriptFiles("quality.py", data=False)
        files.results(stem)
        files.writes("--runs-file", stem.with_name("runs.json"))
        return files

    declared().check()  # a re-run: its own results, no flag needed
    stem.with_suffix(".md").write_text("# table, edited by hand\n", encoding="utf-8")
    with pytest.raises(common.BenchmarkError, match="quality.md exists and was not written"):
        declared().check()
    with pytest.raises(SystemExit) as stopped:  # a write that meets it: one line, exit 2
        common.main_guard(lambda: common.write_markdown(stem, "# new table"))
    assert stopped.value.code == 2
    assert stem.with_suffix(".md").read_text(encoding="utf-8") == "# table, edited by hand\n"


def declared_results(stem: Path, script: str = "quality.py") -> common.ScriptFiles:
    """The declaration of ``script``'s results at ``stem`` (JSON and markdown)."""
    files = common.ScriptFiles(script, data=False)
    files.results(stem)
    return files


def test_a_benchmark_replaces_what_a_benchmark_wrote_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any benchmark's result (the GPU check rewrites the reports its train and encode
    steps wrote) and the committed results (``tools/record_results.py``) are replaced
    without a flag; a file another command of sts-core wrote is not."""
    from sts_core import command_files

    monkeypatch.setitem(command_files._COMMAND, "name", "quality.py")  # restored after
    stem = tmp_path / "quality"
    for writer in ("train.py", common.RESULTS_RECORDER):
        set_command(writer)
        common.write_json(stem, {"rows": []})
        common.write_markdown(stem, "# table")
        declared_results(stem).check()
    set_command("sts-eval")
    common.write_json(stem, {"rows": [1]})
    with pytest.raises(common.BenchmarkError) as refused:
        declared_results(stem).check()
    assert re.fullmatch(
        rf"--output-dir {stem}\.json exists \(written by sts-eval on [-0-9T:]+\): a benchmark "
        "replaces only what a benchmark script wrote; nothing was replaced: choose a new name "
        "or move it",
        str(refused.value),
    )


def test_the_committed_results_writer_is_the_tools(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("record", REPO / "tools" / "record_results.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.COMMAND == common.RESULTS_RECORDER


@pytest.fixture(scope="module")
def saved_model(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder sts-core saved (its save marker lists its files)."""
    from sts_core.encoder import SentenceEncoder

    folder = tmp_path_factory.mktemp("saved") / "model"
    SentenceEncoder.from_pretrained(str(tiny_bert_dir)).save_pretrained(str(folder))
    return folder


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with a file's content (None for a folder)."""
    return {str(p): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("name", ["config.json", "runs.json", "sub/runs.json"])
def test_no_benchmark_writes_into_a_model_sts_core_saved(
    workspace: Workspace, saved_model: Path, capsys, name: str
) -> None:
    """``encode.py --smoke --runs-file <saved model>/config.json`` rewrote the model's
    config and broke it, exit 0 (a saved model's files count as sts-core's): a model saved
    by sts-core takes no benchmark output, its own file or a new one, read by the run or
    not."""
    target = saved_model / name
    before = tree(saved_model)
    argv = [*SMOKE_CPU, "--output-dir", str(workspace.out), "--runs-file", str(target)]
    assert benchmark("encode")(argv) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --runs-file {target} lies inside {saved_model}, a model saved by sts-core: "
        "a benchmark never writes into a saved model; choose another --runs-file"
    )
    assert tree(saved_model) == before


def test_a_run_folder_may_be_the_model_its_earlier_run_saved(saved_model: Path) -> None:
    """``recipes.py --keep-runs``: a run's folder holds the model its earlier run saved,
    which the run replaces itself (``--overwrite_output_dir``); a run folder inside a saved
    model is refused as any output there."""
    again = common.ScriptFiles("recipes.py", data=False)
    again.writes("--keep-runs", saved_model, kind="run")
    again.check()
    inside = common.ScriptFiles("recipes.py", data=False)
    inside.writes("--keep-runs", saved_model / "runs" / "variant0-seed0", kind="run")
    with pytest.raises(common.BenchmarkError, match=f"lies inside {saved_model}, a model saved"):
        inside.check()


def test_a_killed_writes_partial_files_are_removed_by_the_next_run(tmp_path: Path) -> None:
    """A write killed before its rename leaves ``.sts-partial-<pid>-…-<name>``: the next
    run of the script removes those of its own results whose writer is gone, and no
    other (a running writer's, another file's, a file of the user's)."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True, text=True).stdout.strip()  # fmt: skip
    stem = tmp_path / "quality"
    stale = [
        f".sts-partial-{gone}-0a1b2c3d-quality.json",
        f".sts-partial-{gone}-0a1b2c3d-{LEDGER_NAME}",
    ]
    kept = [
        f".sts-partial-{os.getpid()}-0a1b2c3d-quality.md",  # a writer still running
        f".sts-partial-{gone}-0a1b2c3d-notes.txt",  # another file's
        ".sts-partial-notes.txt",  # not named as a write names it
    ]
    for name in (*stale, *kept):
        (tmp_path / name).write_text("part", encoding="utf-8")
    declared_results(stem).check()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_a_chart_is_written_atomically_and_recorded(tmp_path: Path) -> None:
    plt = common.pyplot()
    figure, axes = plt.subplots()
    axes.plot([0, 1], [1, 0])
    path = common.save_figure(figure, tmp_path / "quality.png")
    assert path.read_bytes()[:4] == b"\x89PNG" and written_by_project(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sts-outputs.json", "quality.png"]


def test_a_recipes_run_record_is_recorded_so_that_a_later_run_may_replace_it(
    tmp_path: Path,
) -> None:
    """``--keep-runs``: the next run into a run's folder (``--overwrite_output_dir``) removes
    only what sts-core wrote; the record of the finished run is in the folder's ledger."""
    recipes = load_benchmark_script("recipes")
    script = tmp_path / "train.py"
    metrics = {"sts": {"tasks": {}, "average": {"spearman_all": 80.0}}, "dev": {}}
    script.write_text(
        "import json, sys; from pathlib import Path\n"
        "out = Path(sys.argv[sys.argv.index('--output_dir') + 1]); out.mkdir(parents=True)\n"
        f"(out / 'metrics.json').write_text(json.dumps({metrics!r}))\n",
        encoding="utf-8",
    )
    run = tmp_path / "runs" / "variant0-seed0"
    scores = recipes.run_once(script, tmp_path / "recipe.yaml", [], 0, run, [])
    assert scores["avg"] == 80.0
    assert written_by_project(run / recipes.RUN_RECORD)


class CrossEncoderLike:
    """What ``quality_teacher.save_teacher`` needs of a sentence-transformers
    ``CrossEncoder``: ``save(folder)``, which writes its files there."""

    def save(self, folder: str) -> None:
        (Path(folder) / "config.json").write_text("{}", encoding="utf-8")
        (Path(folder) / "model.safetensors").write_bytes(b"weights")


def test_a_teacher_is_saved_whole_with_its_cost(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The teacher's folder is staged and published with the save marker last (the cost
    file among the files it lists), for our encoder and for a cross-encoder alike."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.saving import read_save_marker

    teacher = load_benchmark_script("quality_teacher")
    cost = {"train_seconds": 1.0, "steps": 2}
    ours = SentenceEncoder.from_pretrained(tiny_bert_dir)
    for name, model, cross in (("ours", ours, False), ("cross", CrossEncoderLike(), True)):
        folder = tmp_path / name
        teacher.save_teacher(model, folder, cost, cross)
        marker = read_save_marker(folder)
        assert marker is not None and "sts_teacher_cost.json" in marker["files"], name
        assert json.loads((folder / "sts_teacher_cost.json").read_text()) == cost
        assert not [p for p in folder.iterdir() if p.name.startswith(".sts-partial")]
    SentenceEncoder.from_pretrained(tmp_path / "ours")  # complete: it loads


def test_the_committed_results_are_in_their_ledgers() -> None:
    """``tools/record_results.py --check``: every committed result under
    ``benchmarks/results`` is recorded as the project's, so a benchmark run again may replace
    it (a result edited by hand: run the tool again and commit the ledger)."""
    command = [sys.executable, str(REPO / "tools" / "record_results.py"), "--check"]
    done = subprocess.run([*command, "benchmarks/results"], cwd=REPO, capture_output=True)
    assert done.returncode == 0, done.stdout.decode()


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize(
    "script,argv,report",
    [
        ("gpu_check", [*SMOKE_CPU], "train_smoke.md"),  # a step's report
        ("gpu_check", [*SMOKE_CPU], "encode_smoke.png"),
        ("quality", ["--render", "{out}/quality.json"], "quality.png"),
        ("pair_tasks", ["--render", "{out}/quality.json"], "quality.md"),
        ("quality_search", ["--compare", "{out}/quality.json"], "quality_search_reproduced.md"),
    ],
)
def test_every_file_a_run_writes_is_declared(
    workspace: Workspace, capsys, script: str, argv: list[str], report: str
) -> None:
    """The files a benchmark writes besides its own stem's: the GPU check's steps' reports,
    a ``--render``'s markdown and chart, ``--compare``'s report: a foreign one is refused
    before any step or rendering."""
    workspace.out.mkdir()
    common.write_json(workspace.out / "quality", {"cells": {}})  # a result of sts-core's
    foreign = workspace.foreign(report)
    argv = [arg.format(out=workspace.out) for arg in argv]
    assert benchmark(script)([*argv, "--output-dir", str(workspace.out)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: ") and f"{foreign} exists and was not written" in line
    assert foreign.read_text(encoding="utf-8") == "the user's own file\n"


def test_no_temporary_file_of_a_write_is_sent_or_committed() -> None:
    """A write's temporary file or a staged bundle (``.sts-partial…``) left by a kill is
    ignored by git, so the device tool never sends it with a call."""
    names = [".sts-partial-1-0a1b-.gpu-call/wheels/x.whl", "benchmarks/results/.sts-partial-x"]
    done = subprocess.run(["git", "check-ignore", *names], cwd=REPO, capture_output=True)
    assert done.stdout.decode().split() == names
