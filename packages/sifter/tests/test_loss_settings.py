"""SIFTER's and SimCSE's losses: settings, edges and messages, each against a value
computed here — every config field ``from_config`` reads (and the defaults equal to
``SifterConfig``'s), the MLP added or not by ``use_mlp``, the one-sentence batch, the
gathered batch (a stand-in gather, one process), and the whole message of each refusal.
Found by the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.losses import in_batch_infonce_loss
from sts_sifter import SifterConfig
from sts_sifter import loss as sifter_module
from sts_sifter.loss import SifterLoss, SimCSELoss, X, Y, Z, sifter_loss

NON_DEFAULT = {
    "infonce_temperature": 0.2,
    "gather_across_processes": True,
    "lambda_xy": 0.5,
    "lambda_xz": 0.0,
    "lambda_yz": 2.0,
    "use_mlp": False,
}


def rows(n: int = 5, d: int = 4, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, d, generator=generator) for _ in range(3)]


def test_from_config_reads_every_field() -> None:
    config = SimpleNamespace(**NON_DEFAULT)
    sifter = SifterLoss.from_config(config, None)
    assert sifter.config_dict() == {
        "temperature": 0.2,
        "lambdas": {"xy": 0.5, "xz": 0.0, "yz": 2.0},
        "gather": True,
    }
    assert isinstance(sifter.head, torch.nn.Identity)  # use_mlp false: no MLP
    simcse = SimCSELoss.from_config(config, None)
    assert simcse.config_dict() == {"temperature": 0.2, "gather": True}


def test_the_defaults_are_the_configs(tiny_bert_dir) -> None:
    """τ 0.05, every λ 1, no gathering, the MLP on: from SifterConfig, from a config
    without the fields (a part of another method's loss_weights) and from the signatures."""
    config = SifterConfig(output_dir="unused", report_to="none")
    for source in (config, SimpleNamespace()):
        model = SentenceEncoder.from_pretrained(tiny_bert_dir)
        SifterLoss.prepare_model(model, source)
        assert "mlp" in model.heads
        sifter = SifterLoss.from_config(source, model)
        assert sifter.head is model.heads["mlp"]
        assert sifter.config_dict() == {
            "temperature": 0.05,
            "lambdas": {"xy": 1.0, "xz": 1.0, "yz": 1.0},
            "gather": False,
        }
        simcse = SimCSELoss.from_config(source, model)
        assert simcse.head is model.heads["mlp"]
        assert simcse.config_dict() == {"temperature": 0.05, "gather": False}
    assert SifterLoss().config_dict() == SifterLoss.from_config(config, model).config_dict()
    assert SimCSELoss(None).config_dict() == {"temperature": 0.05, "gather": False}
    x, y, z = rows()
    torch.testing.assert_close(
        sifter_loss(x, y, z)["loss"],
        sifter_loss(x, y, z, 0.05, {"xy": 1.0, "xz": 1.0, "yz": 1.0})["loss"],
    )


def test_without_the_mlp_the_model_gets_no_head(tiny_bert_dir) -> None:
    model = SentenceEncoder.from_pretrained(tiny_bert_dir)
    SimCSELoss.prepare_model(model, SimpleNamespace(use_mlp=False))
    assert "mlp" not in model.heads


def test_the_losses_read_their_temperature_and_weights() -> None:
    x, y, z = rows(seed=1)
    embeddings = {X: x, Y: y, Z: z, "sentence1": x, "sentence2": y}
    simcse = SimCSELoss(None, temperature=0.2)(embeddings, None)
    torch.testing.assert_close(simcse, in_batch_infonce_loss(x, y, 0.2))
    weights = {"xy": 0.5, "xz": 0.0, "yz": 2.0}
    sifter = SifterLoss(temperature=0.2, weights=weights)(embeddings, None)
    want = 0.5 * in_batch_infonce_loss(x, y, 0.2) + 2.0 * in_batch_infonce_loss(y, z, 0.2)
    torch.testing.assert_close(sifter["loss"], want)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda x, y, z: sifter_loss(x, y, z, weights={"xy": 0, "xz": 0, "yz": 0}),
            "every λ is 0: the loss has no term",
        ),
        (
            lambda x, y, z: SimCSELoss(None, temperature=0.0),
            "temperature must be positive, got 0.0",
        ),
    ],
)
def test_bad_settings_are_refused_with_their_whole_message(call, message: str) -> None:
    with pytest.raises(ValueError) as error:
        call(*rows())
    assert str(error.value) == message


def test_a_batch_of_one_sentence_is_noted_and_two_are_not() -> None:
    loss = SimCSELoss(None)
    x, y, _ = rows(n=2)
    loss({"sentence1": x, "sentence2": y}, None)
    assert loss.pop_degenerate() == []
    loss({"sentence1": x[:1], "sentence2": y[:1]}, None)
    assert [reason for reason, _ in loss.pop_degenerate()] == ["one sentence: no in-batch negative"]


def test_gather_projects_then_gathers_every_column(monkeypatch) -> None:
    """With gather: the loss over the gathered projections (a stand-in gather appending a
    second process's rows), its value passed through scale_gathered_gradient; without it,
    neither is called."""
    calls: list[str] = []

    def fake_gather(tensor: torch.Tensor) -> torch.Tensor:
        calls.append("gather")
        return torch.cat([tensor, tensor.flip(0) * 0.5])

    def fake_scale(tensor: torch.Tensor) -> torch.Tensor:
        calls.append("scale")
        return tensor * 2.0  # a value that shows the scaled loss is the one returned

    monkeypatch.setattr(sifter_module, "all_gather_with_grad", fake_gather)
    monkeypatch.setattr(sifter_module, "scale_gathered_gradient", fake_scale)
    x, y, z = rows(n=1, seed=2)  # one local sentence: two once gathered, not degenerate
    embeddings = {X: x, Y: y, Z: z}
    local = SifterLoss(temperature=0.1)
    local(embeddings, None)
    assert calls == [] and len(local.pop_degenerate()) == 1
    loss = SifterLoss(temperature=0.1, gather=True)
    out = loss(embeddings, None)
    assert calls == ["gather"] * 3 + ["scale"] and loss.pop_degenerate() == []
    want = sifter_loss(fake_gather(x), fake_gather(y), fake_gather(z), 0.1)["loss"]
    torch.testing.assert_close(out["loss"], 2.0 * want)
