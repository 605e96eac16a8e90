#!/usr/bin/env bash
# CI: the prepared GPU call in --device cpu --smoke mode, installed as the GPU machine
# would install it. A fresh Python 3.12 venv gets the GPU machine's packages
# (benchmarks/gpu_machine.txt: torch 2.11.0, transformers 5.17.0, ... and no datasets);
# benchmarks/gpu_call.py prepare builds the bundle from the built wheels; then
# benchmarks/gpu_check.sh installs it there (--no-index --no-deps) and runs the check on
# the bundle's data (STS_MODELS_DIR keeps the real models: the CPU smoke trains MiniLM).
#   bash benchmarks/gpu_call_smoke.sh DIST [REPORTS]   # DIST: .ci/wheels build's folder
# REPORTS (default DIST/gpu-check) gets gpu_check_smoke.{json,md} and the train and encode
# reports, which the cross-package tests read (STS_GPU_CHECK_DIR) instead of a run of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:?usage: benchmarks/gpu_call_smoke.sh DIST [REPORTS]}
reports=${2:-$dist/gpu-check}

python_312() {  # the GPU machine's Python minor version, as found here
  local candidate
  for candidate in "$(uv python find 3.12 2>/dev/null || true)" python3.12 \
    "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3.12; do
    if [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' \
      2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "warning: no Python 3.12 here (the GPU machine's); using python3" >&2
  echo python3
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=$(python_312)
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
echo "::: a fresh venv ($("$python" --version)) with the GPU machine's packages"
UV_PYTHON_DOWNLOADS=never uv venv --quiet --seed --python "$python" "$work/venv"
VIRTUAL_ENV="$work/venv" uv pip install --quiet -r benchmarks/gpu_machine.txt
echo "::: the bundle, as for the GPU machine"
uv run --quiet python benchmarks/gpu_call.py prepare --bundle "$work/bundle" --dist "$dist" \
  --python-version "$version"
echo "::: benchmarks/gpu_check.sh --device cpu --smoke"
env -u STS_DATA_DIR PYTHON="$work/venv/bin/python" STS_GPU_BUNDLE="$work/bundle" \
  OUT="$reports" bash benchmarks/gpu_check.sh --device cpu --smoke
