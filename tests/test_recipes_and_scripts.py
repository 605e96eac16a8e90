"""Every package's YAML recipes parse against its config class; every ``train.py --help``
works; every accelerate config loads and says how to launch it; a bad launch input stops
before training with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launch_support import (
    ACCELERATE_CONFIGS,
    PACKAGES,
    REPO,
    TINY_RECIPE_SETTINGS,
    subprocess_env,
    write_tiny_recipe,
)

from sts_core.testing import load_train_script
from sts_core.training import ConfigParser
from sts_core.training.config import accelerator_available
from sts_core.training.method_registry import installed_method

RECIPES = [
    (package, recipe)
    for package in PACKAGES
    for recipe in sorted((package / "configs").glob("*.yaml"))
]
ACCELERATE_FILES = sorted(ACCELERATE_CONFIGS.glob("*.yaml"))


def test_every_package_has_a_train_script_and_recipes() -> None:
    assert [p.name for p in PACKAGES] == sorted(
        p.name for p in (REPO / "packages").iterdir() if p.is_dir()
    )
    for package in PACKAGES:
        assert list((package / "configs").glob("*.yaml")), f"{package.name}: no recipes"


def test_every_package_has_a_tiny_recipe() -> None:
    """Each package's folder declares it (``[tool.sts-repository] tiny_recipe``), with the
    loss it trains (one of its method's)."""
    for package in PACKAGES:
        settings = TINY_RECIPE_SETTINGS[package.name]
        method = installed_method(package.name)
        assert settings.get("loss") in method.loss_names, f"{package.name}: no tiny recipe"


@pytest.mark.parametrize(
    ("package", "recipe"), RECIPES, ids=[f"{p.name}/{r.name}" for p, r in RECIPES]
)
def test_recipe_parses_against_its_config_class(
    package: Path, recipe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STS_MODELS_DIR", "/models")  # recipes name ${STS_MODELS_DIR}/<model>
    monkeypatch.setenv("NLI_TRAIN_DIR", "/nli")  # and the full NLI train files (paper recipes)
    monkeypatch.setenv("WIKI1M_DIR", "/wiki1m")  # and SimCSE's 1M Wikipedia sentences
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    method = installed_method(package.name)
    assert load_train_script(package).main.__name__ == "main"  # the method's command
    model_args, data_args, config = ConfigParser.for_method(method).parse(["--config", str(recipe)])
    assert model_args.model_name_or_path
    assert data_args.train_datasets
    assert config.output_dir
    assert not config.disable_tqdm, f"{recipe}: a run of it would show no progress bar"
    text = recipe.read_text(encoding="utf-8")
    assert text.startswith("#"), f"{recipe}: should open with a comment saying what it is"
    assert "train.py" in text and "--config" in text, f"{recipe}: no launch command"


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_train_script_help(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The script's ``main`` called here (``python train.py`` itself is started by
    test_bad_launch_input_stops_with_one_line, for every package)."""
    with pytest.raises(SystemExit) as ended:
        load_train_script(package).main(["--help"])
    assert ended.value.code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    for flag in ("--config", "--model_name_or_path", "--train_datasets", "--learning_rate"):
        assert flag in out


@pytest.mark.parametrize("config_file", ACCELERATE_FILES, ids=[f.name for f in ACCELERATE_FILES])
def test_accelerate_config_loads_and_says_how_to_launch(config_file: Path) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(config_file))  # unknown keys are errors there
    text = config_file.read_text(encoding="utf-8")
    assert text.startswith("#")
    assert f"accelerate launch --config_file accelerate_configs/{config_file.name}" in text
    assert config.use_cpu is False  # use_cpu would start one process, or turn DeepSpeed off
    deepspeed_file = (config.deepspeed_config or {}).get("deepspeed_config_file")
    if deepspeed_file:
        settings = json.loads((REPO / deepspeed_file).read_text(encoding="utf-8"))
        # "auto" train_batch_size fails DeepSpeed's check on CPU processes: leave it out
        assert "train_batch_size" not in settings
        assert settings["train_micro_batch_size_per_gpu"] == "auto"
        assert settings["gradient_accumulation_steps"] == "auto"


def test_the_expected_accelerate_configs_exist() -> None:
    names = {f.stem for f in ACCELERATE_FILES}
    expected = {"cpu", "multi_gpu", "multi_node", "deepspeed_zero2", "deepspeed_zero3", "fsdp"}
    assert expected <= names


def run_train_script(package: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(package / "train.py"), *args],
        cwd=REPO,
        env={**subprocess_env(), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr[-2000:]
    for text in expected:
        assert text in lines[0]


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_bad_launch_input_stops_with_one_line(
    package: Path, tiny_bert_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    unknown = write_tiny_recipe(
        tmp_path / "u.yaml", package.name, tiny_bert_dir, out, lerning_rate="1"
    )
    assert_one_line_error(
        run_train_script(package, "--config", str(unknown)), "u.yaml", "lerning_rate"
    )
    assert not out.exists()  # nothing trained, nothing written


def test_bad_launch_inputs_checked_by_the_core_stop_with_one_line(
    tiny_bert_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The core's checks (data, model, DeepSpeed settings) through one package's script:
    every train.py runs the same ``cli_main``, so the other packages need not repeat them.
    Its ``main`` is called here, with the environment accelerate would give the process
    (``python train.py`` itself is started by test_bad_launch_input_stops_with_one_line)."""
    package = next(p for p in PACKAGES if p.name == "cosent")
    main = load_train_script(package).main

    def refused(*argv: str, **env: str) -> str:
        """``main(argv)`` under ``env``: exit 2 and one ``error: …`` line on stderr."""
        with monkeypatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            status = main(list(argv))
        err = capsys.readouterr().err
        assert status == 2, err[-2000:]
        lines = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(lines) == 1, err[-2000:]
        return lines[0]

    out = tmp_path / "out"
    no_data = write_tiny_recipe(
        tmp_path / "d.yaml",
        package.name,
        tiny_bert_dir,
        out,
        train_datasets=f"[{tmp_path / 'nope.csv'}]",
    )
    assert "nope.csv" in refused("--config", str(no_data))

    no_model = write_tiny_recipe(tmp_path / "m.yaml", package.name, tmp_path / "no-model", out)
    assert "no-model" in refused("--config", str(no_model))

    recipe = write_tiny_recipe(tmp_path / "r.yaml", package.name, tiny_bert_dir, out)
    missing_json = refused("--config", str(recipe), "--deepspeed", str(tmp_path / "zero9.json"))
    assert "zero9.json" in missing_json and "not found" in missing_json
    with_cpu = refused(
        "--config", str(recipe), "--use_cpu", "true", ACCELERATE_USE_DEEPSPEED="true"
    )
    assert "use_cpu turns DeepSpeed off" in with_cpu
    if not accelerator_available():  # FSDP here would be plain DDP with exit 0
        fsdp = refused("--config", str(recipe), ACCELERATE_USE_FSDP="true")
        assert "FSDP needs GPUs" in fsdp and "cpu.yaml" in fsdp

    # a machine without DeepSpeed: `import deepspeed` fails
    monkeypatch.setitem(sys.modules, "deepspeed", None)
    without = refused("--config", str(recipe), ACCELERATE_USE_DEEPSPEED="true")
    assert "DeepSpeed is not installed" in without and "sts-core[deepspeed]" in without
    assert not out.exists()  # nothing trained, nothing written
