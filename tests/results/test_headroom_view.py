"""headroom.json as report blocks (harness/results/headroom_view.py): its own page beside the sweep,
and the "Headroom" section of a bench run's report when the sweep ran into the run's folder."""

from __future__ import annotations

import json

from harness.headroom import HeadroomSettings, analyse
from harness.results import report
from harness.results.headroom_view import HEADROOM_JSON, write_headroom_pages
from tests.analysis.test_headroom import point, sweep
from tests.results_fixtures import MATRIX, make_run

SETTINGS = HeadroomSettings(ks=(1, 2, 3, 4), concurrencies=(1, 2, 4, 8), profiles=(0.5,), target_speedup=2.0)


def found() -> dict:
    """A sweep of synthetic numbers with the draft's own cells at k = 3 beside it."""
    pts = sweep(noise_sd=0.02, seed=2, repeats=2)
    for c in (1, 4):
        for r in range(3):
            pts.append(point("baseline", 0, c, 0.01 * r, repeat=r, pair="k3-draft"))
            pts.append(point("draft", 3, c, -0.01 * r, al=3.0, repeat=r, pair="k3-draft"))
    return analyse(pts, SETTINGS)


def test_pages_beside_the_sweep(tmp_path):
    f = found()
    page = write_headroom_pages(f, tmp_path)
    md = (tmp_path / "headroom.md").read_text()
    assert "predicted speedup within the measured CI: 2 of 2 cells (100%)" in md
    assert "never results" in md and "AL a target speedup needs" in md and "kimi-k2.5-eagle3" in md
    assert (tmp_path / "headroom.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.read_text().count("data:image/png;base64,") == 1


def test_bench_report_gets_a_headroom_section(tmp_path):
    run = make_run(tmp_path, "with-headroom", MATRIX)
    assert "## Headroom" not in report.write_report(run, tmp_path / "plain").markdown.read_text()
    (run / HEADROOM_JSON).write_text(json.dumps(found()))
    files = report.write_report(run, tmp_path / "out")
    md = files.markdown.read_text()
    assert "## Headroom" in md and "allowed × (fit)" in md and "](headroom.png)" in md
    assert files.html.read_text().count("data:image/png;base64,") == len(files.plots) + 1


def test_a_busy_engine_is_named_on_the_page(tmp_path):
    from harness.headroom import machine_busy

    engines = {
        "baseline": {"model": "m"},
        "headroom-k1-draft": {"foreign_cpu": 0.02},
        "headroom-k2-draft": {"foreign_cpu": 0.31},
        "headroom-k3-draft": {"foreign_cpu": None},  # psutil could not read: not called busy
    }
    machine = machine_busy(engines)
    assert machine["busy_engines"] == ["headroom-k2-draft"] and machine["foreign_cpu_max"] == 0.31
    write_headroom_pages({**found(), "machine": machine}, tmp_path)
    md = (tmp_path / "headroom.md").read_text()
    assert "MACHINE BUSY" in md and "headroom-k2-draft ran (at most 31%)" in md
    quiet = machine_busy({"headroom-k1-draft": {"foreign_cpu": 0.02}})
    write_headroom_pages({**found(), "machine": quiet}, tmp_path / "quiet")
    assert "MACHINE BUSY" not in (tmp_path / "quiet" / "headroom.md").read_text()
