"""Training report plot: loss and per-TTT-step accuracy against optimizer step."""

from __future__ import annotations

import json
import re
from pathlib import Path


def plot_training(run_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = json.loads((run_dir / "train_curve.json").read_text())
    train = curves["train"]
    steps = list(range(1, len(train) + 1))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax1.plot(steps, [m.get("loss") for m in train])
    ax1.set(title="Draft training loss per step", xlabel="optimizer step", ylabel="loss (KL to verifier)")
    ax1.set_yscale("log")
    # EAGLE-3 logs full_acc_k (steps 0..k all correct); P-EAGLE position_k_acc (depth k alone);
    # DFlash position_k_acc for its slots k >= 1 after the anchor
    per_position = sorted(
        {int(key.split("_")[1]) for m in train for key in m if re.fullmatch(r"position_\d+_acc", key)}
    )
    key, ks = ("position_{k}_acc", per_position) if per_position else ("full_acc_{k}", [])
    if not per_position:
        while any(key.format(k=len(ks)) in m for m in train):
            ks.append(len(ks))
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
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
