"""The training run's closing summary for people."""

from __future__ import annotations

from harness.ui import fmt


def render_train_summary(res, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    r = res.report.to_dict()
    t = Table(title=f"draft trained: {res.draft_dir}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "predicted acceptance length",
        fmt(r.get("predicted_acceptance_length"), "{:.2f}") + "  (1 + sum of held-out full accuracy per TTT step)",
    )
    t.add_row("held-out full accuracy per step", " ".join(fmt(a, "{:.3f}") for a in r.get("held_out_full_acc", [])))
    if r.get("init_held_out_full_acc"):
        t.add_row("  at step 0 (warm start)", " ".join(fmt(a, "{:.3f}") for a in r["init_held_out_full_acc"]))
    t.add_row("train loss", f"{fmt(r.get('train_loss_first'), '{:.3f}')} -> {fmt(r.get('train_loss_last'), '{:.3f}')}")
    t.add_row(
        "training",
        f"{fmt(r.get('train_wall_s'), '{:.0f}')} s, {r.get('train_tokens') or 0:,} tokens, "
        f"{fmt(r.get('train_tok_per_s'), '{:.0f}')} tokens/s",
    )
    t.add_row("train/serve agreement", fmt(r.get("agreement"), "{:.3f}") + "  (greedy tokens, vLLM vs transformers)")
    vocab = r.get("vocab") or {}
    t.add_row("draft vocab", f"{vocab.get('draft_vocab_size')} tokens, coverage {fmt(vocab.get('coverage'), '{:.3f}')}")
    health = res.report.health
    if health is not None:
        t.add_row("training health", ("" if health.healthy else "[yellow]") + escape(health.line()))
    t.add_row("run folder", str(res.run_dir))
    console.print(t)
