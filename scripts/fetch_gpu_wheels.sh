#!/usr/bin/env bash
# Download the wheels a bare CUDA machine (torch, transformers, pandas, safetensors, typer, rich,
# numpy; no network) needs to run scripts/gpu_train_check.py, into .whl/ (git-ignored).
# Versions are requirements/cpu.lock's. Binary wheels come for CPython 3.11 and 3.12, x86_64
# manylinux; scripts/gpu_train_check.sh installs only those matching the machine's python.
# Why each one: docs/gpu-check.md.
#   scripts/fetch_gpu_wheels.sh [STANDIN_DIR]
# With STANDIN_DIR (a built stand-in, e.g. from `harness verifier make-standin`), it is also copied to
# .cache/gpu-check/standin (git-ignored) and the whole carry is sized: repository + wheels + stand-in.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-.venv/bin/python -m pip}
DEST=.whl
PURE=(speculators==0.9.0 hs-connectors==0.9.0 pydantic==2.14.4 annotated-types==0.8.0
      typing-inspection==0.4.5 typing_extensions==4.16.0
      openai==3.57.0 sniffio==1.3.1 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 anyio==4.16.0
      h11==0.16.0 idna==3.20 httpx==0.28.1 httpcore==1.0.9 certifi==2026.10.19.post1)
BINARY=(pydantic_core==2.50.5 jiter==0.19.0)

mkdir -p "$DEST"
for py in 3.11 3.12; do
  $PIP download --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux2014_x86_64 -d "$DEST" "${BINARY[@]}"
done
$PIP download --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
  --platform manylinux2014_x86_64 -d "$DEST" "${PURE[@]}"
ls -l "$DEST"
CARRY=.cache/gpu-check/standin
if [ $# -ge 1 ]; then
  rm -rf "$CARRY" && mkdir -p "$(dirname "$CARRY")" && cp -r "$1" "$CARRY"
fi
# what the device tool copies: tracked + untracked-not-ignored files, plus the carried paths
repo_bytes=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
whl_bytes=$(du -sb "$DEST" | cut -f1)
standin_bytes=$( [ -d "$CARRY" ] && du -sb "$CARRY" | cut -f1 || echo 0)
awk -v r="$repo_bytes" -v w="$whl_bytes" -v s="$standin_bytes" 'BEGIN {
  printf "carry: repository %.1f MiB + wheels %.1f MiB + stand-in %.1f MiB = %.1f MiB (limit 64 MiB)\n",
         r/2^20, w/2^20, s/2^20, (r+w+s)/2^20 }'
