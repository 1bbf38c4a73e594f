"""The static checks `make check` runs first (issue 29): mypy and ruff with the project's settings
(pyproject.toml) are live (a planted error fails them), and the tree passes them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    # run as `make check` runs it (cwd = the repository, pyproject.toml found there): an explicit
    # --config-file makes mypy treat the cache `make check` wrote as stale (~20 s instead of ~2)
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_mypy_reports_a_planted_type_error(tmp_path):
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text('x: int = "a"\n')
    res = _mypy("--cache-dir", str(tmp_path / "cache"), str(pkg / "mod.py"))
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "mod.py:1: error: Incompatible types in assignment" in out, out
    assert "[assignment]" in out, out


def test_harness_passes_mypy():
    # the project's files (harness/) and the default .mypy_cache: seconds once warm (`make check`)
    res = _mypy()
    assert res.returncode == 0, res.stdout + res.stderr


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run(
        [str(ruff), *args, "--config", str(CONFIG)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_ruff_reports_a_planted_lint_error_and_unformatted_code(tmp_path):
    bad = tmp_path / "planted.py"
    bad.write_text("import os\nx=[1,\n 2]\n")
    lint = _ruff("check", str(bad))
    assert lint.returncode == 1 and "F401" in lint.stdout, lint.stdout + lint.stderr
    fmt = _ruff("format", "--check", str(bad))
    assert fmt.returncode == 1 and "reformat" in fmt.stdout + fmt.stderr, fmt.stdout + fmt.stderr


def test_the_tree_passes_ruff():
    assert _ruff("check", "harness", "tests", "bench").returncode == 0
    assert _ruff("format", "--check", "harness", "tests", "bench").returncode == 0


def test_results_read_rows_and_manifests_as_types_so_mypy_catches_a_string_key(tmp_path):
    """harness/results/ reads rows and manifests as harness/schema.py's and schema_manifest.py's
    types: a field read by string key, or a renamed column, is a type error, not a run-time surprise
    (issue 29)."""
    planted = tmp_path / "planted_reader.py"
    planted.write_text(
        "from harness.results.runs import read_run\n"
        "run = read_run('x')\n"
        "al = run.rows[0].get('acceptance_length')\n"
        "status = run.manifest['status']\n"
        "old = run.rows[0].acceptance_len\n"
    )
    res = _mypy(str(planted))  # the project's cache, warm after `make check`: seconds, not ~20
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert 'planted_reader.py:3: error: "CellRow" has no attribute "get"' in out, out
    assert 'planted_reader.py:4: error: Value of type "Manifest" is not indexable' in out, out
    assert 'planted_reader.py:5: error: "CellRow" has no attribute "acceptance_len"' in out, out
