"""Bad input to the benchmark scripts stops with one line before any data loads or any cell
trains (issue 44): ``quality_search.py --set`` through the recipe checks of the method a cell
trains, every output folder checked writable first, every model argument checked first,
and no input of a run inside a folder a run empties. Nothing here trains: the environment
names empty folders (a fake model folder), so a check that came too late would meet the
missing data or model instead and the test would fail."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_support import REPO, load_benchmark_module, load_benchmark_script

from sts_core.search.cells import Recipe


def scripts_common() -> ModuleType:
    """``benchmarks/_common.py`` as the scripts import it (``_common``: their BenchmarkError)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module("_common")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


common = scripts_common()


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """STS_DATA_DIR an empty folder, STS_MODELS_DIR a folder whose MiniLM and mpnet are only
    a ``config.json``: the environment checks pass, any real work fails at once."""
    models, data = tmp_path / "models", tmp_path / "data"
    for name in (common.MINILM, common.MPNET):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text("{}", encoding="utf-8")
    data.mkdir()
    monkeypatch.setenv("STS_MODELS_DIR", str(models))
    monkeypatch.setenv("STS_DATA_DIR", str(data))
    return tmp_path


def refused(main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``main(argv)`` as the script's ``__main__`` runs it: exit status 2 and one line."""
    with pytest.raises(SystemExit) as stopped:
        common.main_guard(lambda: main(argv))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert stopped.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


# ----------------------------------------------------------------------------- --set
@pytest.fixture(scope="module")
def search():
    return load_benchmark_script("quality_search")


@pytest.fixture(scope="module")
def cells():
    return load_benchmark_module("grid_search.cells")


@pytest.fixture(scope="module")
def training():
    return load_benchmark_module("grid_search.search")


@pytest.fixture(scope="module")
def via_search():
    return load_benchmark_module("grid_search.via_search")


def search_args(*settings: str, methods: tuple[str, ...] = ("ours-cosine_mse",)) -> list[str]:
    argv = ["--smoke", "--methods", *methods]
    for setting in settings:
        argv += ["--set", setting]
    return argv


@pytest.mark.parametrize(
    "setting,message",
    [
        ("nosuchkey=1", "--set nosuchkey=1: unknown key(s) 'nosuchkey'"),
        ("learnig_rate=1e-5", "unknown key(s) 'learnig_rate' (did you mean 'learning_rate'?)"),
        ("learning_rate=abc", "--set learning_rate=abc: learning_rate: cannot read 'abc' as float"),
        ("weight_decay=-1", "--set weight_decay=-1: weight_decay must be finite and ≥ 0, got -1.0"),
        ("max_seq_length=0", "--set max_seq_length=0: max_seq_length must be at least 1, got 0"),
        ("teacher_weight=2", "--set teacher_weight=2: teacher_weight must be in (0, 1], got 2.0"),
        ("weight_averaging=unifrm", "weight_averaging 'unifrm' is not one of none, uniform, ema"),
        ("weight_averaging_every=2.5", "weight_averaging_every: cannot read '2.5' as int"),
        ('loss_weights={"cosine_mse":1,"pearsn":1}', "unknown loss 'pearsn'"),
        # valid values of fields the search does not pass on
        ("learning_rate=1e-5", "the search sets learning_rate itself (with --learning-rate)"),
        ("weight_decay=0.05", "the search sets weight_decay itself (to 0.01 for every row)"),
        ("max_seq_length=128", "--set max_seq_length=128: a model option"),
        ("train_datasets=sickr", "--set train_datasets=sickr: a data option"),
    ],
)
def test_a_set_value_gets_the_recipe_checks_at_parse_time(
    search, setting: str, message: str
) -> None:
    with pytest.raises(common.BenchmarkError) as error:
        search.parse_args(search_args(setting))
    assert message in str(error.value)


def test_a_bad_set_is_one_line_and_exit_2_before_anything_loads(
    search, fake_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = fake_env / "out"
    argv = [*search_args("weight_decay=-1"), "--output-dir", str(output)]
    line = refused(search.main, argv, capsys)
    assert line == "error: --set weight_decay=-1: weight_decay must be finite and ≥ 0, got -1.0"
    assert not output.exists()


def test_set_checks_the_method_each_row_trains(search, fake_env: Path) -> None:
    """The first stage's loss must be a loss of the row's method; a peer-only search checks
    the teacher's settings with the core's parser; a teacher must be a model folder."""
    stage = search_args("stage1_loss=cosent", "stage1_epochs=1", methods=("ours-pcc_pearson",))
    with pytest.raises(common.BenchmarkError) as error:
        search.parse_args(stage)
    assert str(error.value).startswith("--set stage1_loss=cosent: loss 'cosent' is not one of ")
    search.parse_args(search_args("stage1_loss=cosine_mse", "stage1_epochs=1"))  # cosent's
    with pytest.raises(common.BenchmarkError, match=r"teacher_weight must be in \(0, 1\]"):
        search.parse_args(search_args("teacher_weight=3", methods=("st-cosine",)))
    with pytest.raises(common.BenchmarkError, match="--set teacher_model=nosuch: model 'nosuch'"):
        search.parse_args(search_args("teacher_model=nosuch"))
    with pytest.raises(common.BenchmarkError, match="--set teacher_neighbours: given twice"):
        search.parse_args(search_args("teacher_neighbours=1", "teacher_neighbours=2"))


def test_set_values_are_checked_together_and_the_error_names_its_own(
    search, fake_env: Path
) -> None:
    """A key that needs another passes with it (``teacher_neighbours`` with a teacher); of
    several values the line names the one it is about."""
    teacher = f"teacher_model={common.MPNET}"  # a model folder of the fake environment
    args = search.parse_args(search_args(teacher, "teacher_neighbours=1", "teacher_weight=0.5"))
    assert dict(args.settings)["teacher_neighbours"] == "1"
    with pytest.raises(common.BenchmarkError) as error:
        search.parse_args(search_args("teacher_neighbours=1"))
    assert str(error.value).startswith("--set teacher_neighbours=1: teacher_neighbours needs ")
    with pytest.raises(common.BenchmarkError) as error:
        search.parse_args(search_args("teacher_weight=0.5", "weight_decay=-1"))
    assert str(error.value).startswith("--set weight_decay=-1: weight_decay must be ")


def test_our_cells_train_with_the_values_the_checks_read(search, via_search) -> None:
    """A ``--set`` that passed is given to the row's ``sts-search`` in its field's type, the
    value the checks read (the int ``2`` for ``2.0``, not JSON's float), beside the
    benchmark's fixed settings, the row named as ``sts-search`` names it."""
    args = search.parse_args(search_args("weight_averaging=uniform", "weight_averaging_every=2.0"))
    settings = dict(via_search.search_settings(args, "ours-cosine_mse", args.settings))
    assert settings["weight_averaging"] == "uniform"
    assert settings["weight_averaging_every"] == 2
    assert type(settings["weight_averaging_every"]) is int
    assert settings["pooling"] == "mean" and settings["max_train_samples"] == 64  # smoke cap
    assert via_search.searched_row("ours-cosine_mse") == "cosent:cosine_mse"
    assert via_search.searched_row("st-embed-distill") == "st:embed-distill"


# ----------------------------------------------------------------------------- output folders
def under_a_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    return blocker / "results"


def test_writable_folder_creates_probes_and_names_flag_and_path(tmp_path: Path, monkeypatch):
    made = common.writable_folder("--output-dir", tmp_path / "new" / "folder")
    assert made.is_dir() and list(made.iterdir()) == []  # the probe removed
    target = under_a_file(tmp_path)
    with pytest.raises(common.BenchmarkError) as error:
        common.writable_folder("--weights-dir", target)
    assert (
        str(error.value)
        == f"--weights-dir {target}: cannot be a folder ({target.parent} is a file)"
    )
    with pytest.raises(common.BenchmarkError, match="--output-dir .*a-file: cannot be a folder"):
        common.writable_folder("--output-dir", target.parent)  # the file itself

    real_mkstemp = common.tempfile.mkstemp

    def denied(*args, **kwargs):  # an unwritable folder (chmod does not stop root)
        if Path(kwargs["dir"]) == tmp_path / "locked":
            raise PermissionError(13, "Permission denied")
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(common.tempfile, "mkstemp", denied)
    with pytest.raises(common.BenchmarkError) as error:
        common.writable_folder("--weights-dir", tmp_path / "locked")
    assert (
        str(error.value)
        == f"--weights-dir {tmp_path / 'locked'}: cannot write there (Permission denied)"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(common.BenchmarkError, match="cannot write there"):
        common.writable_folder("--weights-dir", locked)


@pytest.mark.parametrize("flag", ["--weights-dir", "--output-dir", "--cells"])
def test_quality_search_checks_its_folders_before_any_cell(
    search, fake_env: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """Today's loss: an unwritable ``--weights-dir`` failed after the cell trained."""
    target = under_a_file(fake_env)
    argv = ["--smoke", "--in-process", "--output-dir", str(fake_env / "out")]
    argv += ["--weights-dir", str(fake_env / "weights"), flag, str(target)]
    line = refused(search.main, argv, capsys)
    where = target.parent if flag == "--cells" else target  # the cells file's folder
    assert line.startswith(f"error: {flag} {where}: cannot be a folder")


def test_quality_search_render_needs_its_cells_file(search, tmp_path, capsys) -> None:
    cells = tmp_path / "cells.json"
    argv = ["--render", "--cells", str(cells), "--output-dir", str(tmp_path)]
    assert refused(search.main, argv, capsys) == (
        f"error: --cells {cells}: no such file (nothing to --render)"
    )


# the scripts whose work starts after the environment check: each must check its output
# folder first (the fake environment makes any real work fail at once, and differently)
OUTPUT_FLAGS = [
    ("train", ["--smoke", "--device", "cpu"], "--output-dir"),
    ("encode", ["--smoke", "--device", "cpu"], "--output-dir"),
    ("quality", ["--smoke"], "--output-dir"),
    ("pair_tasks", ["--smoke"], "--output-dir"),
    ("data_scale", ["--smoke"], "--output-dir"),
    ("gpu_check", ["--smoke", "--device", "cpu"], "--output-dir"),
    ("recipes", ["--recipe", "r.yaml", "--variant", "a="], "--output-dir"),
    ("recipes", ["--recipe", "r.yaml", "--variant", "a="], "--keep-runs"),
]


@pytest.mark.parametrize("script,argv,flag", OUTPUT_FLAGS)
def test_every_output_folder_is_checked_before_the_work(
    fake_env: Path, capsys: pytest.CaptureFixture[str], script: str, argv: list[str], flag: str
) -> None:
    target = under_a_file(fake_env)
    module = load_benchmark_script(script)
    if flag != "--output-dir":
        argv = [*argv, "--output-dir", str(fake_env / "out")]
    if script == "recipes":  # the folders are made once checked off what the runs read
        (fake_env / "r.yaml").write_text("learning_rate: 1.0e-5\n", encoding="utf-8")
        argv = [str(fake_env / a) if a == "r.yaml" else a for a in argv]
        argv += ["--script", str(fake_script(fake_env))]
    line = refused(module.main, [*argv, flag, str(target)], capsys)
    assert line.startswith(f"error: {flag} {target}: cannot be a folder")


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--sizes", "0", "must be an integer of at least 1, got 0"),
        ("--train-sizes", "-5", "must be an integer of at least 1, got -5"),
        ("--steps", "0", "must be an integer of at least 1, got 0"),
        ("--batch-size", "1.5", "'1.5' is not an integer"),
        ("--threads", "0", "must be an integer of at least 1, got 0"),
    ],
)
def test_data_scale_refuses_a_bad_number_before_any_table_is_written(
    fake_env: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    """``data_scale.py``'s counts (``_common.COUNT``): one line, exit status 2, nothing
    made (no output folder, no table)."""
    output = fake_env / "out"
    argv = ["--smoke", "--output-dir", str(output), option, value]
    line = refused(load_benchmark_script("data_scale").main, argv, capsys)
    assert line == f"error: argument {option}: {message}"
    assert not output.exists()


def test_encode_with_a_random_model_needs_only_the_tokenizer_model(
    fake_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The H200 call of 2026-11-27 refused the GPU encode step: its full mode lists MiniLM
    and mpnet, and the bundle carries MiniLM's tokenizer alone."""
    shutil.rmtree(fake_env / "models" / common.MPNET)
    encode = load_benchmark_script("encode")
    target = under_a_file(fake_env)
    argv = ["--device", "cpu", "--model-config", "bert-base", "--output-dir", str(target)]
    line = refused(encode.main, argv, capsys)  # past the model check, at the output folder
    assert line.startswith(f"error: --output-dir {target}: cannot be a folder")


def test_quality_teacher_checks_its_output_folder_before_training(
    fake_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    teacher = load_benchmark_script("quality_teacher")
    target = under_a_file(fake_env) / "teacher"
    line = refused(teacher.main, ["--smoke", "--output", str(target)], capsys)
    assert line.startswith(f"error: --output {target.parent}: cannot be a folder")


# ----------------------------------------------------------------------------- inputs
def test_gpu_check_refuses_a_missing_decoder_before_its_steps(
    fake_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Today ``--decoder nosuchmodel`` was refused after 140 s of other steps."""
    check = load_benchmark_script("gpu_check")

    def no_step(*args: object) -> None:
        raise AssertionError("a step ran before the inputs were checked")

    for step in ("cuda_tests_step", "train_step", "encode_step", "lora_step", "faiss_step"):
        monkeypatch.setattr(check, step, no_step)
    argv = ["--smoke", "--device", "cpu", "--output-dir", str(fake_env / "out")]
    line = refused(check.main, [*argv, "--decoder", "nosuchmodel"], capsys)
    assert line == (
        f"error: --decoder 'nosuchmodel': {fake_env / 'models' / 'nosuchmodel'} is not a model "
        "folder (no config.json)"
    )


def fake_script(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit(3)  # a run that fails at once\n", encoding="utf-8")
    return script


def test_recipes_checks_its_files_before_any_run(
    fake_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipes = load_benchmark_script("recipes")
    script = fake_script(fake_env)
    missing = fake_env / "no-recipe.yaml"
    argv = ["--recipe", str(missing), "--script", str(script), "--variant", "a=", "--seeds", "0"]
    argv += ["--output-dir", str(fake_env / "out")]
    assert refused(recipes.main, argv, capsys) == f"error: --recipe {missing}: no such file"


@pytest.mark.parametrize("where", ["base", "recipe data", "variant config"])
def test_recipes_refuses_an_input_inside_a_folder_its_runs_empty(
    fake_env: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """Each run trains with ``--overwrite_output_dir`` into ``<keep-runs>/variantI-seedS``:
    a model, data file or recipe there would be deleted by its run."""
    recipes = load_benchmark_script("recipes")
    keep = fake_env / "runs"
    run_folder = keep / "variant0-seed1"
    run_folder.mkdir(parents=True)
    inside = run_folder / {"base": "model", "recipe data": "train.csv"}.get(where, "other.yaml")
    recipe = fake_env / "recipe.yaml"
    train = inside if where == "recipe data" else fake_env / "elsewhere.csv"
    recipe.write_text(f"train_datasets: [{train}]\nlearning_rate: 1e-5\n", encoding="utf-8")
    if where == "base":
        inside.mkdir()
        (inside / "config.json").write_text("{}", encoding="utf-8")
    else:
        inside.write_text("seed: 1\n", encoding="utf-8")
    variant = f"a=--config {inside}" if where == "variant config" else "a="
    argv = ["--recipe", str(recipe), "--script", str(fake_script(fake_env)), "--variant", variant]
    argv += ["--seeds", "0", "1", "--keep-runs", str(keep), "--output-dir", str(fake_env / "o")]
    argv += ["--base", str(inside)] if where == "base" else []
    line = refused(recipes.main, argv, capsys)
    named = {"base": "--base", "recipe data": "--recipe's train_datasets"}
    option = named.get(where, "--variant a")
    assert line == (
        f"error: --keep-runs {run_folder} holds {inside}, the input {option} of recipes.py: "
        "writing there would change what it reads; nothing was written: choose another "
        "--keep-runs"
    )
    assert inside.exists()


def test_the_cells_file_is_written_without_replacing_a_file_beside_it(
    cells, tmp_path: Path
) -> None:
    """The cells file was written through ``<name>.tmp``: a user's file of that name was
    replaced, then moved onto the cells file (gone)."""
    neighbour = tmp_path / "cells.tmp"
    neighbour.write_text("the user's notes", encoding="utf-8")
    table = cells.CellsFile(tmp_path / "cells.json")
    cell = cells.Cell(Recipe("ours-a", (), 1.0, 4e-5), 0)
    table.add(cell.key, {**cells.describe(cell), "dev": 88.0})
    assert neighbour.read_text(encoding="utf-8") == "the user's notes"
    saved = json.loads((tmp_path / "cells.json").read_text(encoding="utf-8"))["cells"]
    assert saved[cell.key]["dev"] == 88.0
    # the ledger beside it: the cells file is sts-core's, a later search may replace it
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".cells.json.lock", ".sts-outputs.json", "cells.json", "cells.tmp",
    ]  # fmt: skip
    # a second search's table on the same file: its cell added, the first one's kept
    other = cells.Cell(Recipe("ours-a", (), 2.0, 4e-5), 0)
    cells.CellsFile(tmp_path / "cells.json").add(other.key, {**cells.describe(other), "dev": 1})
    table.add(cell.key, {**cells.describe(cell), "dev": 89.0})  # read again before written
    saved = json.loads((tmp_path / "cells.json").read_text(encoding="utf-8"))["cells"]
    assert {key: record["dev"] for key, record in saved.items()} == {cell.key: 89.0, other.key: 1}


# ----------------------------------------------------------------------------- stored results
def stored_cell(cells, path: Path, inputs: dict) -> str:
    """A cells file at ``path`` holding one cell trained on ``inputs``, as the benchmark
    writes it; its key."""
    from sts_core.command_files import set_command

    set_command("quality_search.py")
    cell = cells.Cell(Recipe("st-cosine", (), 1.0, 2e-5), 0)
    cells.CellsFile(path).add(cell.key, {**cells.describe(cell), "dev": 80.0, "inputs": inputs})
    return cell.key


@pytest.mark.parametrize("changed", ["model", "budget"])
def test_cells_trained_on_other_inputs_are_refused_before_anything_trains(
    search, cells, fake_env: Path, capsys: pytest.CaptureFixture[str], changed: str
) -> None:
    """``quality_search.py --smoke`` run again with another ``--model`` reused the cells and
    its report named the new model: each cell records what it was trained on, and a search
    on other inputs (the model's or a table's content, the budget) is refused, naming it."""
    out = fake_env / "out"
    argv = ["--smoke", "--in-process", "--output-dir", str(out)]
    argv += ["--weights-dir", str(fake_env / "weights")]
    now = cells.search_inputs(search.parse_args(argv))
    recorded = json.loads(json.dumps(now))
    if changed == "model":
        recorded["--model"]["xxh3_128"] = "0" * 32
    else:
        recorded["budget"]["batch_size"] = 32
    key = stored_cell(cells, out / "quality_search_smoke_cells.json", recorded)
    what = (
        f"--model {now['--model']['path']}: xxh3_128 000000000000… → "
        f"{now['--model']['xxh3_128'][:12]}…"
        if changed == "model"
        else "the budget's batch_size 32 → 16"
    )
    assert refused(search.main, argv, capsys) == (
        f"error: --cells {out / 'quality_search_smoke_cells.json'}: cell {key!r} was trained "
        f"on other inputs ({what}): give this search a cells file and --weights-dir of its "
        "own, or run it on the inputs its cells were trained on"
    )
    cells.check_stored_inputs(out / "quality_search_smoke_cells.json", recorded)  # its own
    stored_cell(cells, fake_env / "old.json", {})  # recorded before the inputs were
    cells.check_stored_inputs(fake_env / "old.json", now)


def test_a_weights_dir_shared_with_another_budget_refuses_its_search_folder(
    search, via_search, fake_env: Path
) -> None:
    """A shared ``--weights-dir`` holds the ``sts-search`` folder of the same row trained by
    another search on another budget: that folder is refused before anything trains (its
    models are no models of this search)."""
    from sts_core.search.spec import SearchError, check_folder, record_identity

    shared = ["--weights-dir", str(fake_env / "weights"), "--methods", "st-cosine"]
    spec = via_search.search_spec(search.parse_args(["--smoke", *shared]), "st-cosine", ())
    record_identity(spec)
    check_folder(spec)  # its own folder
    other = search.parse_args(["--smoke", "--batch-size", "32", *shared])
    again = via_search.search_spec(other, "st-cosine", ())
    assert again.output_dir == spec.output_dir
    with pytest.raises(SearchError, match=r"holds another search's cells \(.* batch_size"):
        check_folder(again)


COUNTING_SCRIPT = """import json, sys
from pathlib import Path
from sts_core.command_files import content_identity
out = Path(sys.argv[sys.argv.index('--output_dir') + 1]); out.mkdir(parents=True, exist_ok=True)
with open(sys.argv[0] + '.runs', 'a') as runs: runs.write('run\\n')
data = str(Path(sys.argv[0]).parent / 'train.csv')
metrics = {'sts': {'tasks': {}, 'average': {'spearman_all': 80.0}}, 'dev': {},
           'inputs': {'train_datasets ' + data: content_identity(data)}}
(out / 'metrics.json').write_text(json.dumps(metrics))
"""


def test_a_kept_run_is_rerun_when_what_it_read_changed(tmp_path: Path, capsys) -> None:
    """``recipes.py --keep-runs`` read a finished run whose command was the same, though the
    recipe (or the data) at the same path had changed: the run records the content of what
    it read, and a change is a rerun, saying why."""
    from argparse import Namespace

    recipes = load_benchmark_script("recipes")
    script, recipe, data = tmp_path / "train.py", tmp_path / "r.yaml", tmp_path / "train.csv"
    script.write_text(COUNTING_SCRIPT, encoding="utf-8")
    recipe.write_text("learning_rate: 1.0e-5\n", encoding="utf-8")
    data.write_text("sentence1,sentence2,score\na,b,1\n", encoding="utf-8")
    args = Namespace(recipe=str(recipe), script=str(script), base=None, variant=["a="])
    run = tmp_path / "runs" / "variant0-seed0"

    def runs_after() -> int:
        recipes.run_once(script, recipe, [], 0, run, [], recipes.run_identities(args, []))
        return len(Path(f"{script}.runs").read_text().splitlines())

    assert runs_after() == 1
    assert runs_after() == 1  # read, not rerun
    recipe.write_text("learning_rate: 2.0e-5\n", encoding="utf-8")
    assert runs_after() == 2
    assert f"rerun, its input --recipe {recipe} changed since (xxh3_128 " in capsys.readouterr().out
    data.write_text("sentence1,sentence2,score\na,b,2\n", encoding="utf-8")  # the run's own
    assert runs_after() == 3
    assert f"rerun, its input train_datasets {data} changed since" in capsys.readouterr().out
    assert runs_after() == 3
