"""bench/perturb_draft.py's pure parts: which weights a planted regression touches, and the scale search."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location(
    "perturb_draft", Path(__file__).resolve().parents[2] / "bench" / "perturb_draft.py"
)
assert _spec is not None and _spec.loader is not None
perturb_draft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perturb_draft)


def _weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "fc.weight": torch.randn(8, 24, generator=g),
        "layers.0.self_attn.q_proj.weight": torch.randn(8, 16, generator=g).to(torch.bfloat16),
        "layers.0.input_layernorm.weight": torch.ones(8),
        "embed_tokens.weight": torch.randn(32, 8, generator=g),
        "lm_head.weight": torch.randn(16, 8, generator=g),
        "d2t": torch.arange(16),
    }


def test_only_the_drafts_own_matrices_move_and_the_draw_is_seeded():
    w = _weights()
    a = perturb_draft.perturbed(w, 0.5, seed=3)
    b = perturb_draft.perturbed(w, 0.5, seed=3)
    moved = {k for k in w if not torch.equal(a[k], w[k])}
    assert moved == {"fc.weight", "layers.0.self_attn.q_proj.weight"}
    assert all(torch.equal(a[k], b[k]) and a[k].dtype == w[k].dtype for k in w)
    rel = float((a["fc.weight"] - w["fc.weight"]).std() / w["fc.weight"].std())
    assert 0.35 < rel < 0.65  # noise at half the matrix's own spread
    assert all(torch.equal(perturb_draft.perturbed(w, 0.0, 3)[k], w[k]) for k in w)


def test_the_search_brackets_then_bisects_to_the_nearest_scale():
    def al(scale: float) -> tuple[float, list[float]]:
        return 3.0 - 2.0 * scale**2, []  # predicted AL falls with the noise

    scale, got, _ = perturb_draft.search(al, 2.85, steps=8)
    assert abs(got - 2.85) < 0.01 and abs(scale - 0.2739) < 0.01
