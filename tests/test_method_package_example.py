"""The README's "Writing a method package" example as a real package: its blocks written to
the files their first lines name, installed (``uv pip install --target``, offline), trained
for 2 steps by ``sts-launch marginmse`` and found as a row of ``benchmarks/quality.py
--smoke`` — all through the entry point its ``pyproject.toml`` declares."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from launch_support import DEV, REPO, TRAIN, subprocess_env

from sts_core.testing import write_fixture_recipe

README = REPO / "README.md"


def example_files() -> dict[str, str]:
    """Each code block of the section, by the path its first line names."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Writing a method package", 1)[1].split("\n## ", 1)[0]
    files = {}
    for block in re.findall(r"```\w+\n(.*?)```", section, flags=re.S):
        first = block.split("\n", 1)[0]
        path = first.removeprefix("#").split(":", 1)[0].strip()
        files[path] = block
    return files


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed into its own folder (put on ``PYTHONPATH``); the workspace's
    environment is left as it is."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (the project's installer: python3 -m pip install uv)")
    root = tmp_path_factory.mktemp("marginmse")
    for path, text in example_files().items():
        target = root / "package" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    site = root / "site"
    command = [uv, "pip", "install", "--offline", "--no-deps", "--python", sys.executable]
    command += ["--target", str(site), str(root / "package")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return site


def with_example(site: Path) -> dict[str, str]:
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def test_the_example_names_its_three_files() -> None:
    assert set(example_files()) == {
        "src/sts_marginmse/__init__.py",
        "pyproject.toml",
        "configs/cpu_stsb.yaml",
    }


def test_sts_launch_trains_the_installed_example_for_two_steps(
    installed: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml",
        "the installed README example",
        tiny_bert_nodropout_dir,
        TRAIN,
        DEV,
        tmp_path / "out",
        score_range="[0, 5]",
        margin="0.05",
        max_steps="2",
    )
    launcher = [str(Path(sys.executable).with_name("sts-launch"))]
    launcher += ["--config_file", "accelerate_configs/cpu.yaml", "--num_processes", "1"]
    command = [*launcher, "marginmse", "--config", str(recipe)]
    result = subprocess.run(
        command, cwd=REPO, env=with_example(installed), capture_output=True, text=True, timeout=540
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["train"]["batches"]["batches"] == 2 and metrics["train"]["train_loss"] > 0
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "`marginmse` method" in card and "margin_mse" in card


@pytest.mark.real_data
@pytest.mark.real_model
def test_the_quality_benchmark_finds_the_examples_row(
    installed: Path, sts_data_dir: Path, minilm_dir: Path, tmp_path: Path
) -> None:
    env = with_example(installed)
    env.update(STS_DATA_DIR=str(sts_data_dir), STS_MODELS_DIR=str(minilm_dir.parent))
    command = [sys.executable, str(REPO / "benchmarks" / "quality.py"), "--smoke"]
    command += ["--methods", "base", "ours-margin_mse", "--output-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "quality_smoke.json").read_text(encoding="utf-8"))
    rows = {row["method"]: row for row in report["rows"]}
    assert set(rows) == {"base", "ours-margin_mse"}
    assert "| ours: margin MSE |" in (tmp_path / "quality_smoke.md").read_text(encoding="utf-8")


# run in the scratch copy (its tests/ and tools/ first on the path), the example installed
FIND_EVERYWHERE = """
import json
import sys

sys.path[:0] = ["tests", "tools"]
import generate_docs
import launch_support
import mutation
from sts_core.launch import not_found
from sts_core.losses.registry import LOSSES, load_installed_losses
from sts_core.training.help import options_reference
from sts_core.training.method_registry import installed_method_names, load_methods, quality_rows

broken = load_installed_losses()
print(json.dumps({
    "names": installed_method_names(),
    "losses": sorted(LOSSES),
    "broken": [b.describe() for b in broken],
    "options": options_reference(list(load_methods().values())),
    "rows": sorted(quality_rows()),
    "launch": not_found("nomethod"),
    "launch_tests": launch_support.TINY_RECIPE_SETTINGS.get("marginmse"),
    "mutation": list(mutation.PACKAGES),
    "generated": generate_docs.main([]),
    "current": generate_docs.main(["--check"]),
}))
"""

# what a method inside the repository adds beside the README's three files
TRAIN_SCRIPT = 'from sts_marginmse import main\n\nif __name__ == "__main__":\n    main()\n'
MAIN = "\nfrom sts_core.training import command\n\nmain = command(METHOD)\n"
REPOSITORY_TABLE = '\n[tool.sts-repository]\ntiny_recipe = { loss = "margin_mse" }\n'
# the workspace lists of the root pyproject.toml: (after this line, add this one)
WORKSPACE_LISTS = [
    ('    "sts-sifter[spacy,stanza]",\n', '    "sts-marginmse",\n'),
    ("sts-sifter = { workspace = true }\n", "sts-marginmse = { workspace = true }\n"),
    ('"sts_bsc", "sts_sifter"', '"sts_bsc", "sts_sifter", "sts_marginmse"'),
]


def repository_files() -> list[str]:
    """The repository's files as a fresh clone has them, with this checkout's edits."""
    from doc_commands import repository_files as listed

    return listed()


def file_digests(root: Path) -> dict[str, str]:
    """Each file's SHA-256, less Python's compiled modules (``__pycache__``: what running
    the tools there writes, which git ignores)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def add_example_method(root: Path) -> None:
    """The example as a method of the repository: its folder and the root's workspace lists."""
    folder = root / "packages" / "marginmse"
    for path, text in example_files().items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        extra = {"pyproject.toml": REPOSITORY_TABLE, "src/sts_marginmse/__init__.py": MAIN}
        target.write_text(text + extra.get(path, ""), encoding="utf-8")
    (folder / "train.py").write_text(TRAIN_SCRIPT, encoding="utf-8")
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    for after, line in WORKSPACE_LISTS:
        assert text.count(after) == 1, f"the root pyproject.toml no longer has {after!r}"
        text = text.replace(after, after + line if line.endswith("\n") else line)
    pyproject.write_text(text, encoding="utf-8")


def test_a_method_added_in_a_scratch_copy_of_the_repository_is_in_every_list(
    installed: Path, tmp_path: Path
) -> None:
    """Its folder and the workspace lists alone put it in the method list sts-train and
    sts-launch read, the loss registry, the options reference, the quality rows, the launch
    tests' recipes and the mutation tool's packages; the generator then rewrites only the
    generated parts (the docs' tables, the catalogue of loss packages), not the layout."""
    root = tmp_path / "repository"
    for path in repository_files():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, root / path)
    add_example_method(root)
    added = file_digests(root)
    result = subprocess.run(
        [sys.executable, "-c", FIND_EVERYWHERE],
        cwd=root,
        env=with_example(installed),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert "marginmse" in found["names"] and not found["broken"]
    assert "margin_mse" in found["losses"]
    assert "### `marginmse`" in found["options"]
    assert "| `margin` | 0.1 | m of the margin MSE. |" in found["options"]
    assert "ours-margin_mse" in found["rows"]
    assert "marginmse" in found["launch"]
    assert found["launch_tests"] == {"loss": "margin_mse"}
    assert "marginmse" in found["mutation"]
    assert (found["generated"], found["current"]) == (0, 0)
    # the generator rewrote its three parts and nothing else
    after = file_digests(root)
    generated = {p for p in after if added.get(p) != after[p]}
    catalogue = "shared/src/sts_core/losses/catalogue.py"
    assert generated == {"docs/methods.md", "docs/options.md", "docs/data.md", catalogue}
    assert '"margin_mse": "sts-marginmse",' in (root / catalogue).read_text(encoding="utf-8")
    table = (root / "docs" / "methods.md").read_text(encoding="utf-8")
    assert "| `marginmse` | Margin MSE (an example) | `margin_mse` |" in table
    data = (root / "docs" / "data.md").read_text(encoding="utf-8")
    assert "| scored pairs |" in data and "`margin_mse` (marginmse)" in data
