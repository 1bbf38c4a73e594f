"""The training run's closing summary for people."""

from __future__ import annotations

from harness.ui import fmt


def _f(v, spec: str = "{:.3f}") -> str:
    return fmt(v, spec)


def render_train_summary(res, console) -> None:
    from rich.table import Table

    r = res.report.to_dict()
    t = Table(title=f"draft trained: {res.draft_dir}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "predicted acceptance length",
        _f(r.get("predicted_acceptance_length"), "{:.2f}") + "  (1 + sum of held-out full accuracy per TTT step)",
    )
    t.add_row("held-out full accuracy per step", " ".join(_f(a) for a in r.get("held_out_full_acc", [])))
    if r.get("init_held_out_full_acc"):
        t.add_row("  at step 0 (warm start)", " ".join(_f(a) for a in r["init_held_out_full_acc"]))
    t.add_row("train loss", f"{_f(r.get('train_loss_first'))} -> {_f(r.get('train_loss_last'))}")
    t.add_row(
        "training",
        f"{_f(r.get('train_wall_s'), '{:.0f}')} s, {r.get('train_tokens') or 0:,} tokens, "
        f"{_f(r.get('train_tok_per_s'), '{:.0f}')} tokens/s",
    )
    t.add_row("train/serve agreement", _f(r.get("agreement")) + "  (greedy tokens, vLLM vs transformers)")
    vocab = r.get("vocab") or {}
    t.add_row("draft vocab", f"{vocab.get('draft_vocab_size')} tokens, coverage {_f(vocab.get('coverage'))}")
    t.add_row("run folder", str(res.run_dir))
    console.print(t)
