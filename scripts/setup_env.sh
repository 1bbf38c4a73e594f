#!/usr/bin/env bash
# Build the project's CPU environment in .venv (idempotent; a stamp skips work already done).
#
# Order matters (docs/facts.md §3): torch 2.13.0+cpu first, then everything else with --no-deps from
# the lock under a constraint that holds torch, so no resolver can pull a CUDA torch or PyPI's
# torchvision/torchaudio (which break transformers imports beside a CPU torch).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${HARNESS_VENV:-.venv}
PY=${PYTHON:-python3}
LOCK=requirements/cpu.lock
STAMP="$VENV/.harness-env-$(cat "$LOCK" pyproject.toml scripts/setup_env.sh | sha256sum | cut -c1-16)"

if [[ -f "$STAMP" ]]; then
  exit 0
fi

echo "[setup] creating $VENV (one time, ~1-2 min)" >&2
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

TORCH="torch==2.13.0+cpu"
CONSTRAINT=$(mktemp)
trap 'rm -f "$CONSTRAINT"' EXIT
echo "$TORCH" > "$CONSTRAINT"

# The installer: uv (pinned) where it installs, pip otherwise; the same pins, order and flags.
# uv downloads and unpacks in parallel: the whole install ~70 s instead of pip's ~4 min on 2 cores
# (README, "Measured"). --compile-bytecode does what pip does at install: vLLM's ~2,000 modules
# compiled once, not in every process that imports them (PYTHONDONTWRITEBYTECODE is set here).
if "${PIP[@]}" install uv==0.13.9 2>/dev/null; then
  INSTALL=("$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --compile-bytecode)
  UNINSTALL=("$VENV/bin/uv" pip uninstall --quiet --python "$VENV/bin/python")
  FIND_LINKS=()  # pip reads its find-links from its config; uv is told
  [[ -n "${PIP_FIND_LINKS:-}" ]] && FIND_LINKS=(--find-links "$PIP_FIND_LINKS")
else
  INSTALL=("${PIP[@]}" install)
  UNINSTALL=("${PIP[@]}" uninstall -y)
  FIND_LINKS=()
fi

# The +cpu build is not on PyPI: these machines carry it in pip's find-links; elsewhere it
# comes from PyTorch's CPU index.
if ! "${INSTALL[@]}" "${FIND_LINKS[@]}" "$TORCH" 2>/dev/null; then
  "${INSTALL[@]}" "$TORCH" --index-url https://download.pytorch.org/whl/cpu
fi
"${INSTALL[@]}" --no-deps -c "$CONSTRAINT" -r "$LOCK"
"${UNINSTALL[@]}" torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# vLLM's suffix decoding imports arctic-inference, which the registry has as source only: built here
# (its C++ suffix tree, ~30 s; uv caches the wheel) against this torch, with the build tools the lock
# pins (cmake, ninja, nanobind, grpcio-tools, setuptools). Kept out of the lock: a plain install of it
# would build in isolation and pull a CUDA torch (requirements/README.md).
ARCTIC="arctic-inference==0.3.0"
PATH="$(cd "$VENV" && pwd)/bin:$PATH" CMAKE_ARGS="-DPython_EXECUTABLE=$(cd "$VENV" && pwd)/bin/python" \
  "${INSTALL[@]}" --no-deps --no-build-isolation "$ARCTIC"
"${INSTALL[@]}" --no-deps -e .

# Fail now, with a clear line, rather than deep inside a test.
"$VENV/bin/python" - <<'EOF'
import torch, transformers, vllm, speculators  # noqa: F401
from arctic_inference.suffix_decoding import SuffixDecodingCache  # noqa: F401  (vLLM's suffix method)
assert torch.__version__ == "2.13.0+cpu", f"torch is {torch.__version__}, expected 2.13.0+cpu"
EOF
rm -f "$VENV"/.harness-env-*
touch "$STAMP"
echo "[setup] environment ready: $VENV" >&2
