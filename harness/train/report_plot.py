"""Training report plot: loss and per-TTT-step accuracy against optimizer step."""

from __future__ import annotations

import json
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
    # EAGLE-3 logs full_acc_k (steps 0..k all correct); P-EAGLE position_k_acc (depth k alone)
    peagle = any("position_0_acc" in m for m in train)
    key = "position_{k}_acc" if peagle else "full_acc_{k}"
    k = 0
    while any(key.format(k=k) in m for m in train):
        ax2.plot(steps, [m.get(key.format(k=k)) for m in train], label=f"{'depth' if peagle else 'TTT step'} {k}")
        k += 1
    ax2.set(
        title="Training accuracy per depth (P-EAGLE)" if peagle else "Training full accuracy per TTT step",
        xlabel="optimizer step",
        ylabel="fraction of positions (depth k correct)"
        if peagle
        else "fraction of positions (steps 0..k all correct)",
        ylim=(0, 1),
    )
    ax2.legend()
    fig.tight_layout()
    out = run_dir / "train_report.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
