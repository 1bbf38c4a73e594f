#!/usr/bin/env bash
# Run on the GPU machine, from the repository root (docs/gpu-check.md):
#   scripts/gpu_train_check.sh STANDIN_DIR [gpu_train_check.py options...]
# Installs the carried wheels (.whl/, from scripts/fetch_gpu_wheels.sh) into a private target folder
# (no venv, no user site, nothing outside the repo touched), checks the imports, then runs
# scripts/gpu_train_check.py. The figures (one JSON line) also land in $OUT/gpu_train_check.json
# when $OUT is set. PYTHON picks the interpreter (default: python3 or python, whichever has torch).
set -euo pipefail
cd "$(dirname "$0")/.."
# the interpreter that has torch: $PYTHON, else python3, else python
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3 python; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import torch' 2>/dev/null; then PY=$cand; break; fi
  done
fi
if [ -z "$PY" ]; then
  echo "gpu_train_check.sh: no python with torch found (tried python3, python); set PYTHON=/path/to/python" >&2
  exit 3
fi
if [ $# -lt 1 ]; then
  echo "usage: scripts/gpu_train_check.sh STANDIN_DIR [options for scripts/gpu_train_check.py]" >&2
  exit 2
fi
STANDIN=$1
shift
SITE=${GPU_SITE:-.gpu-site}
# what the machine carried here: stand-in, wheels, the repository's own files
echo "[gpu_train_check.sh] carried: stand-in $(du -sh "$STANDIN" | cut -f1), wheels $(du -sh .whl | cut -f1);" \
     "python $($PY -c 'import platform; print(platform.python_version())')" >&2

# every distribution carried in .whl/ (scripts/fetch_gpu_wheels.sh decides which)
mapfile -t WHEELS < <(ls .whl/*.whl | xargs -n1 basename | cut -d- -f1 | sort -u)
rm -rf "$SITE"
mkdir -p "$SITE"
if $PY -m pip --version >/dev/null 2>&1; then
  # --find-links picks, per name, the wheel this python can use (both cp311 and cp312 are carried)
  $PY -m pip install --quiet --no-deps --no-index --find-links .whl --target "$SITE" "${WHEELS[@]}"
else
  # no pip: a wheel is a zip laid out for site-packages; unpack those this python can use
  $PY - "$SITE" <<'EOF'
import sys, zipfile, pathlib
tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
for whl in sorted(pathlib.Path(".whl").glob("*.whl")):
    if whl.name.endswith("-none-any.whl") or f"-{tag}-" in whl.name:
        zipfile.ZipFile(whl).extractall(sys.argv[1])
EOF
fi
export PYTHONPATH="$PWD/$SITE${PYTHONPATH:+:$PYTHONPATH}"

# preflight: every import the training path makes (no vLLM), transformers >= 5, and on CUDA the
# Triton toolchain, in a few seconds and before any GPU work
$PY scripts/gpu_train_check.py --standin "$STANDIN" --preflight "$@"

JSON_OUT=()
if [ -n "${OUT:-}" ]; then
  JSON_OUT=(--json-out "$OUT/gpu_train_check.json")
fi
exec $PY scripts/gpu_train_check.py --standin "$STANDIN" ${JSON_OUT[@]+"${JSON_OUT[@]}"} "$@"
