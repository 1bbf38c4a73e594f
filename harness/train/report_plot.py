"""Training report plot: loss and per-TTT-step accuracy against optimizer step."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from harness.provenance import atomic_write_bytes


def plot_training(run_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = json.loads((run_dir / "train_curve.json").read_text())
    train = curves["train"]
    steps = list(range(1, len(train) + 1))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax1.plot(steps, [m.get("loss") for m in train])
    plan = run_dir / "fit_plan.json"  # the loss that ran (kl_div: KL to the verifier; DFlash's default: ce)
    loss = json.loads(plan.read_text()).get("loss", "kl_div") if plan.is_file() else "kl_div"
    ax1.set(
        title="Draft training loss per step",
        xlabel="optimizer step",
        ylabel="loss (KL to verifier)" if loss == "kl_div" else f"loss ({loss})",
    )
    ax1.set_yscale("log")

    def logged(pattern: str) -> list[int]:
        return sorted({int(m_.group(1)) for m in train for key in m if (m_ := re.fullmatch(pattern, key))})

    # EAGLE-3 logs full_acc_k (steps 0..k all correct); P-EAGLE position_k_acc (depth k alone);
    # DFlash position_k_acc for its slots k >= 1 after the anchor
    per_position = logged(r"position_(\d+)_acc")
    key, ks = ("position_{k}_acc", per_position) if per_position else ("full_acc_{k}", logged(r"full_acc_(\d+)"))
    for k in ks:
        ax2.plot(
            steps, [m.get(key.format(k=k)) for m in train], label=f"{'position' if per_position else 'TTT step'} {k}"
        )
    ax2.set(
        title="Training accuracy per draft position" if per_position else "Training full accuracy per TTT step",
        xlabel="optimizer step",
        ylabel="fraction of positions (position k correct)"
        if per_position
        else "fraction of positions (steps 0..k all correct)",
        ylim=(0, 1),
    )
    ax2.legend()
    fig.tight_layout()
    out = run_dir / "train_report.png"
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(out, buf.getvalue())  # a full disk leaves no truncated PNG
    plt.close(fig)
    return out
