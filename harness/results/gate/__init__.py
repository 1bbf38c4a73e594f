"""`harness gate`: hold a run's speculative cells against a stored baseline; exit 1 on regression.

What it checks, the baseline folder's format and the precedence of its options: docs/gate.md.
One job a module: `cell_checks` and `crossover_checks` (the pure checks), `evaluate` (options,
verdict, matching a run to a baseline), `baseline` (baseline.json read, written, built from a run)
and `render` (console, Markdown, JUnit XML, gate.json).
"""
