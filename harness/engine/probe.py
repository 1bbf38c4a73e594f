"""Read vLLM's own residual stream inside its worker (through `LLM.apply_model`).

vLLM's EAGLE-3 aux id i is the residual stream entering decoder layer i. These functions run in
the vLLM worker process: `install` hooks the decoder layers of the loaded model, the caller
runs one prefill, `collect` returns what the hooks saw (the first forward only) and removes
them. With it, training-side hidden states are compared with the served model's own, layer by
layer, instead of being assumed equal.
"""

from __future__ import annotations

from typing import Any

_ATTR = "_harness_probe"


def _decoder_layers(model) -> Any:
    import torch

    best = None
    for name, mod in model.named_modules():
        if name.endswith("layers") and isinstance(mod, torch.nn.ModuleList) and len(mod) > 0:
            if "vision" in name or "visual" in name:
                continue
            if best is None or len(mod) > len(best):
                best = mod
    if best is None:
        raise RuntimeError("no decoder layer list found in the vLLM model")
    return best


def install(model, layer_ids: list[int]) -> int:
    """Hook the outputs of layers id-1 (the stream entering layer id). Returns the layer count."""
    layers = _decoder_layers(model)
    store: dict[int, Any] = {}
    handles = []
    for i in layer_ids:
        if i == 0 or i > len(layers):
            continue

        def hook(mod, args, out, i=i):
            if i in store:
                return  # first forward (the prefill) only
            if isinstance(out, tuple):
                h, res = out[0], out[1] if len(out) > 1 else None
                stream = h if res is None else h + res
            else:
                stream = out
            store[i] = stream.detach().float().cpu().clone()

        handles.append(layers[i - 1].register_forward_hook(hook))
    setattr(model, _ATTR, (store, handles))
    return len(layers)


def collect(model) -> dict[int, Any]:
    store, handles = getattr(model, _ATTR, ({}, []))
    for h in handles:
        h.remove()
    if hasattr(model, _ATTR):
        delattr(model, _ATTR)
    return dict(store)
