#!/usr/bin/env bash
# The prepared GPU call: runs on the lent GPU machine's own python3 as it is (no registry
# there). It installs the carried wheels (.gpu-call/wheels: the project wheels and the
# third-party ones the image lacks) with --no-index --no-deps, so the test support, the
# methods' entry points and the package metadata exist; unpacks the carried data; runs
# benchmarks/gpu_check.py (6 minutes on a GPU, each step within its own limit) and
# copies its reports into $OUT (what the device tool brings back), else benchmarks/results.
#   here:  uv run python benchmarks/gpu_call.py prepare    # builds .gpu-call, prints the call
#   there: bash benchmarks/gpu_check.sh [gpu_check.py options]   (carry .gpu-call)
# CI runs it in a venv with the GPU machine's versions: benchmarks/gpu_call_smoke.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${STS_GPU_BUNDLE:-.gpu-call}
python=${PYTHON:-python3}
results=${OUT:-benchmarks/results}
if [ ! -f "$bundle/.sts-gpu-call" ]; then
  echo "error: no $bundle here: run 'uv run python benchmarks/gpu_call.py prepare' and carry it" >&2
  exit 2
fi
bundle=$(cd "$bundle" && pwd)
echo "::: $("$python" --version) at $("$python" -c 'import sys; print(sys.prefix)')"
echo "::: pip install --no-index --no-deps $bundle/wheels/*.whl"
"$python" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
  --disable-pip-version-check "$bundle"/wheels/*.whl
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/data" "$scratch/reports"
tar xzf "$bundle/data.tar.gz" -C "$scratch/data"
export STS_DATA_DIR=${STS_DATA_DIR:-$scratch/data}
export STS_MODELS_DIR=${STS_MODELS_DIR:-$bundle/models}
export PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE  # keep compiled modules: each process after the first starts faster
# the install as the project sees it: versions, the methods' entry points, the test support
"$python" - <<'PY'
import importlib.metadata as metadata
import importlib.util

from sts_core.training.method_registry import installed_method_names

names = ["sts-core", "torch", "transformers", "accelerate", "sentence-transformers", "peft",
         "datasets", "bitsandbytes"]
found = {}
for name in names:
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[name] = "absent"
print("::: versions:", ", ".join(f"{k} {v}" for k, v in found.items()))
methods = installed_method_names()
support = importlib.util.find_spec("sts_core.testing") is not None  # loaded with -p
shown = "sts_core.testing" if support else "absent"
print("::: methods:", ", ".join(methods), "| test support:", shown)
assert len(methods) >= 6 and support, "the project wheels did not install"
PY
status=0
"$python" benchmarks/gpu_check.py --output-dir "$scratch/reports" "$@" || status=$?
mkdir -p "$results"
find "$scratch/reports" -maxdepth 1 -type f \( -name "*.json" -o -name "*.md" -o -name "*.png" \) \
  -exec cp {} "$results/" \;
echo "::: reports in $results: $(cd "$scratch/reports" && ls | tr '\n' ' ')"
exit "$status"
