# Every target sets up the pinned CPU environment in .venv first (scripts/setup_env.sh; one time).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo demo-thinking check test test-fast bench-speed

setup:
	@scripts/setup_env.sh

demo: setup  ## the main job on the embedded default (tiny Kimi-K2.5 stand-in, CPU)
	$(VENV)/bin/harness train-and-bench

demo-thinking: setup  ## the main job on the stand-in in K2.5's thinking format: AL per thinking / answer segment
	$(VENV)/bin/harness train-and-bench train/tiny-kimi-thinking.toml

LINTED := harness tests bench

check: setup  ## static checks, seconds: ruff's formatter and linter, then mypy over harness/ (settings: pyproject.toml)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/mypy

test: setup check  ## the static checks, then the whole suite, real vLLM-CPU engines included
	$(PY) -m pytest -q --durations=50 -n 2

test-fast: setup  ## unit tests only (no engine, no training)
	$(PY) -m pytest -q -m "not slow"

bench-speed: setup  ## one cell through the harness and through vLLM's own benchmark, side by side
	$(PY) bench/compare_with_vllm.py --repeats 9 --num-prompts 32 --max-tokens 128 $(ARGS)
