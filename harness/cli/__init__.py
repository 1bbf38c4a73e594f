"""The `harness` command line: thin commands that parse, call one function, render, exit.

Exit codes: 0 ok · 1 regression (gate) · 2 bad input or config · 3 infrastructure failure ·
4 internal error (traceback in a log) · 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP.
Heavy imports (torch, vLLM, pandas) happen inside command bodies so `--help` is instant.
Tables for people go to stdout, `--json` output is for machines, progress and logs go to stderr.

`entry.main` is the console script; `app` assembles the commands of `jobs` (train, train-and-bench
and their dry run), `measure` (bench, soak), `checkpoints` (verifier, draft), `recipe` and
`harness.results.commands` (compare, report, gate); `common` holds what they share.
"""
