"""Plant a regression of a chosen size in a real draft (issue 52: "perturbations scaled to a measured AL
drop"), for the paired gate to catch or pass.

    .venv/bin/python bench/perturb_draft.py TRAIN_DIR --drop 0.05 --out DIR [--draft DIR] [--seed 0]

TRAIN_DIR is a finished `harness train` folder (its fit_plan.json, hidden-state shards and vocab maps);
the draft is its `draft/` unless --draft names another draft trained there (a checkpoint). Gaussian noise
is added to the draft's own matrices (fc and the decoder layer's projections; not its norms, embeddings,
output head or vocab maps), each entry N(0, (s · sd of its matrix)²) from one seeded draw, and the scale s
is bisected until the draft's predicted AL (PREDICTED_AL_DEFINITION: 1 + the held-out full accuracy per
TTT step, on the training's own held-out split, speculators' validation through the harness's warm start)
is (1 − drop) × the original's. The copy is a draft folder like the original (its config, vocab maps and
harness.json, the predicted AL updated), with its own content hash:

    .venv/bin/harness bench RECIPE --draft DIR --set gate.baseline_draft=ORIGINAL ...

serves it beside the original, and the served AL drop is the measured one (the prediction tracks served
AL within a few % on the demo's model). Printed: each bisection step's scale and predicted AL, then the
copy's path and predicted drop.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.train.fit import evaluate_draft  # noqa: E402
from harness.train.records import FitConfig, held_out_full_acc, predicted_al  # noqa: E402

WEIGHTS = "model.safetensors"


def perturbable(name: str, tensor: torch.Tensor) -> bool:
    """The draft's own trained matrices: fc and the decoder layers' projections."""
    return tensor.ndim == 2 and (name.startswith("fc.") or name.startswith("layers."))


def perturbed(weights: dict[str, torch.Tensor], scale: float, seed: int) -> dict[str, torch.Tensor]:
    """Every perturbable matrix plus N(0, (scale · its sd)²) noise, from one seeded draw per matrix."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name in sorted(weights):
        w = weights[name]
        if perturbable(name, w):
            noise = torch.randn(w.shape, generator=gen, dtype=torch.float32) * float(w.float().std()) * scale
            w = (w.float() + noise).to(w.dtype)
        out[name] = w
    return out


def write_copy(src: Path, dst: Path, weights: dict[str, torch.Tensor]) -> None:
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    save_file(weights, str(tmp / WEIGHTS), metadata={"format": "pt"})
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)


def predicted(plan: FitConfig, draft: Path) -> tuple[float, list[float]]:
    """The draft's predicted AL and held-out full accuracy per TTT step."""
    plan = FitConfig.from_dict({**plan.to_dict(), "init_from": str(draft)})
    metrics = evaluate_draft(plan)
    al = predicted_al(metrics, plan.method, plan.ttt_steps)
    if al is None:
        sys.exit(f"{draft}: the held-out split gave no accuracy (is the training's hidden/ folder there?)")
    return al, held_out_full_acc(metrics, plan.method, plan.ttt_steps)


def search(try_scale, target: float, steps: int) -> tuple[float, float, list[float]]:
    """The scale whose predicted AL is nearest `target`: doubling from 0.05 until AL falls to it, then
    bisecting (AL falls with the scale, noisily: the nearest seen wins)."""
    seen: list[tuple[float, float, list[float]]] = []
    low, high = 0.0, 0.05
    for _ in range(12):
        seen.append((high, *try_scale(high)))
        if seen[-1][1] <= target:
            break
        low, high = high, 2 * high
    for _ in range(steps):
        mid = (low + high) / 2
        seen.append((mid, *try_scale(mid)))
        low, high = (mid, high) if seen[-1][1] > target else (low, mid)
    return min(seen, key=lambda x: abs(x[1] - target))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train_dir", type=Path)
    ap.add_argument("--drop", type=float, default=0.05, help="target relative drop of predicted AL")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--draft", type=Path, help="the draft to perturb (default TRAIN_DIR/draft)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=6, help="bisection steps after the bracket")
    args = ap.parse_args()
    plan_file = args.train_dir / "fit_plan.json"
    if not plan_file.is_file():
        sys.exit(f"{args.train_dir}: no fit_plan.json; give a finished `harness train` folder")
    plan = FitConfig.from_dict(json.loads(plan_file.read_text()))
    src = args.draft or args.train_dir / "draft"
    weights = load_file(str(src / WEIGHTS))
    base, _ = predicted(plan, src)
    target = (1 - args.drop) * base
    print(f"{src}: predicted AL {base:.3f}; target {target:.3f} ({-args.drop:+.1%})")
    work = args.out.with_name(args.out.name + ".trial")

    def try_scale(scale: float) -> tuple[float, list[float]]:
        write_copy(src, work, perturbed(weights, scale, args.seed))
        al, accs = predicted(plan, work)
        print(f"  scale {scale:.4f}: predicted AL {al:.3f} ({al / base - 1:+.1%})")
        return al, accs

    scale, al, accs = search(try_scale, target, args.steps)
    shutil.rmtree(work, ignore_errors=True)
    write_copy(src, args.out, perturbed(weights, scale, args.seed))
    meta_file = args.out / "harness.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    meta.update(predicted_acceptance_length=al, held_out_full_acc=accs)
    meta["perturbed"] = {"from": str(src), "scale": scale, "seed": args.seed, "predicted_al_before": base}
    meta_file.write_text(json.dumps(meta, indent=2))
    print(f"{args.out}: scale {scale:.4f}, predicted AL {al:.3f} ({al / base - 1:+.1%} against {base:.3f})")


if __name__ == "__main__":
    main()
