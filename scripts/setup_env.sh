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

echo "[setup] creating $VENV (one time, ~2-3 min)" >&2
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

TORCH="torch==2.13.0+cpu"
CONSTRAINT=$(mktemp)
trap 'rm -f "$CONSTRAINT"' EXIT
echo "$TORCH" > "$CONSTRAINT"

# The +cpu build is not on PyPI: these machines carry it in pip's find-links; elsewhere it
# comes from PyTorch's CPU index.
if ! "${PIP[@]}" install "$TORCH" 2>/dev/null; then
  "${PIP[@]}" install "$TORCH" --index-url https://download.pytorch.org/whl/cpu
fi
"${PIP[@]}" install --no-deps -c "$CONSTRAINT" -r "$LOCK"
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"${PIP[@]}" install --no-deps --no-build-isolation -e . 2>/dev/null || "${PIP[@]}" install --no-deps -e .

# Fail now, with a clear line, rather than deep inside a test.
"$VENV/bin/python" - <<'EOF'
import torch, transformers, vllm, speculators  # noqa: F401
assert torch.__version__ == "2.13.0+cpu", f"torch is {torch.__version__}, expected 2.13.0+cpu"
EOF
rm -f "$VENV"/.harness-env-*
touch "$STAMP"
echo "[setup] environment ready: $VENV" >&2
