"""The regression package's rows of ``benchmarks/quality.py`` (entry point
``sts_core.quality_methods``): a fresh regression head on the benchmark's 0–5 STS scores
(the paper's second stage, without the first), one row per loss."""

from sts_core.quality_methods import register_quality_method
from sts_regression.config import RegressionConfig
from sts_regression.trainer import RegressionTrainer

# The paper's second-stage settings for contrastive models (Smooth K2, x0 0.2, k 3-3.5);
# Translated ReLU with the same band. Labels: STS scores 0–5 as they are; negative
# predictions set to 0 (the authors' code) for every loss: cpu_minilm_sts.yaml's settings.
BAND = {"x0": 0.2}
CLAMP = {"clamp_predictions": "low", "label_range": [0.0, 5.0]}
ROWS = {
    "ours-smooth_k2": ("smooth_k2", {"k": 3.0, **BAND}),
    "ours-translated_relu": ("translated_relu", {"k": 1.0, **BAND}),
    "ours-regression_mse": ("mse", {}),
    "ours-regression_l1": ("l1", {}),
}

for key, (loss, settings) in ROWS.items():
    described = ", ".join(f"{name} {value:g}" for name, value in settings.items())
    register_quality_method(
        key,
        f"ours: RegressionTrainer ({loss}{', ' + described if described else ''})",
        RegressionConfig,
        RegressionTrainer,
        loss=loss,
        **settings,
        **CLAMP,
    )
