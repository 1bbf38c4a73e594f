"""The one number formatter and the one Markdown table (harness/ui.py)."""

from __future__ import annotations

from harness.ui import MISSING, fmt, fmt_ci, md_table


def test_fmt_marks_missing_values_and_applies_decimals_or_a_format():
    assert fmt(None) == fmt(float("nan")) == MISSING
    assert (fmt(2.84999), fmt(3), fmt(3, "{:.2f}"), fmt(0.415, "{:.0%}"), fmt("eagle", 2)) == (
        "2.850",
        "3",
        "3.00",
        "42%",
        "eagle",
    )


def test_fmt_ci_follows_a_value_only_with_both_ends():
    assert fmt_ci(1.714, 1.886) == " [1.71, 1.89]"
    assert fmt_ci(-0.1, 0.4, "{:+.2f}") == " [-0.10, +0.40]"
    assert fmt_ci(None, 1.0) == fmt_ci(1.0, None) == ""


def test_md_table_escapes_a_pipe_inside_a_cell():
    assert md_table(["run", "AL"], [["a", "2.85"], ["b|c", MISSING]]) == [
        "| run | AL |",
        "|---|---|",
        "| a | 2.85 |",
        "| b\\|c | — |",
    ]


def test_progress_after_an_interrupt_shows_the_count_reached_not_all_done():
    from harness.ui import RichReporter

    rep = RichReporter()
    try:
        try:
            rep.stage("bench cells", total=4)
            rep.advance(1)
            raise KeyboardInterrupt
        finally:
            rep.done()
    except KeyboardInterrupt:
        pass
    task = rep.progress.tasks[-1]
    rep.close()
    assert task.completed == 1 and task.fields["info"] == "[red]interrupted[/] at 1/4"


def test_a_cells_log_line_keeps_its_cell_id():
    """A flag is logged as "[<cell id>] <flag>"; rich would read the bracket as a style and drop it,
    and two cells' identical flags then read as one flag printed twice."""
    import io

    from harness.ui import RichReporter

    rep = RichReporter()
    buf = io.StringIO()
    rep.progress.console.file = buf
    rep.log("[draft__chat__k3__c1__t0] LOOPING OUTPUTS (68%)")
    rep.close()
    assert "[draft__chat__k3__c1__t0] LOOPING OUTPUTS (68%)" in buf.getvalue()
