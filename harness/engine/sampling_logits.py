"""Re-score with the verifier's *sampling* distribution computed inside vLLM's worker (through
`LLM.apply_model`), so a re-score returns a few numbers per position instead of the vocabulary.

vLLM 0.32 computes prompt logprobs in the model runner (vllm/v1/worker/gpu_model_runner.py
`_get_prompt_logprobs_dict`, inherited by the CPU runner): `self.model.compute_logits(hidden)`,
then `sampler.compute_logprobs` (a float32 log_softmax) and `sampler.gather_logprobs` (top-k plus
the prompt token's own logprob). `install` shadows the model's `compute_logits` with one that
returns the processed sampling log-probabilities instead of the logits: temperature, nucleus
(top-p) truncation, renormalized, the math of harness/analysis/lossless_sampling.py `processed`
(cut tokens are -inf). The log_softmax of a normalized log-distribution is itself (up to float32
rounding; -inf stays -inf), so `prompt_logprobs = N` then returns the processed top N and each
actual token's processed logprob. `remove` restores the model and says how many times the hook
ran (0: the runner does not call the model apply_model handed over; the caller falls back).
Greedy sampling of the one generated token is unchanged (the argmax of a monotone transform).
Top-p decides most rows from their top NUCLEUS_PROBE tokens (`_nucleus_from_top`) and sorts the
whole vocabulary only where those do not decide it (a flat distribution).
"""

from __future__ import annotations

from typing import Any

_ATTR = "_harness_sampling_logits"


# Top-p looks at this many top tokens first: a row whose nucleus is decided within them skips
# the sort of the whole vocabulary (most of the cost at Kimi's 163,840 tokens on a CPU).
NUCLEUS_PROBE = 256
# ... when the tokens above them hold at least top_p plus this (float64 sums in another order
# could otherwise decide a token at the edge differently from the full sort)
NUCLEUS_SLACK = 1e-9


def processed_logprobs(logits: Any, temperature: float, top_p: float) -> Any:
    """[T, V] logits -> [T, V] float64 sampling log-probabilities, as `processed` computes them
    from vLLM's raw logprobs: the same float32 log_softmax first, then float64 throughout, ties
    in the top-p sort kept in token-id order (numpy's stable argsort of -p)."""
    import torch

    raw = torch.log_softmax(logits, dim=-1, dtype=torch.float32).double()
    z = raw / temperature
    z = z - z.max(dim=-1, keepdim=True).values
    p = torch.exp(z)
    p = p / p.sum(dim=-1, keepdim=True)
    if top_p < 1.0:
        keep = _nucleus_from_top(p, top_p)
        p = torch.where(keep, p, torch.zeros_like(p))
        p = p / p.sum(dim=-1, keepdim=True)
    return torch.log(p)


def _nucleus(p: Any, top_p: float) -> Any:
    """The tokens whose mass strictly above them (sorted by -p, ties by id) is below top_p."""
    import torch

    neg, order = torch.sort(-p, dim=-1, stable=True)
    before = torch.cumsum(-neg, dim=-1) + neg  # cumsum - p, as `processed`
    return torch.zeros_like(p, dtype=torch.bool).scatter_(-1, order, before < top_p)


def _nucleus_from_top(p: Any, top_p: float) -> Any:
    """`_nucleus`, from the top NUCLEUS_PROBE + 1 tokens where that decides it: S, the tokens
    strictly above the (k+1)-th largest probability, are all in the top k, and sorting them alone
    (by -p, then id) gives the full sort's first |S| places and cumsums. When S holds >= top_p
    (+ slack), every token after S is cut. Other rows take the full sort."""
    import torch

    k = min(NUCLEUS_PROBE, p.shape[-1] - 1)
    if k < 1:
        return _nucleus(p, top_p)
    vals, idx = torch.topk(p, k + 1, dim=-1)
    by_id = torch.argsort(idx[:, :k], dim=-1)
    idx, vals_sorted = idx[:, :k].gather(-1, by_id), vals[:, :k].gather(-1, by_id)
    neg, order = torch.sort(-vals_sorted, dim=-1, stable=True)
    idx = idx.gather(-1, order)
    cums = torch.cumsum(-neg, dim=-1)
    in_s = -neg > vals[:, k : k + 1]
    size = in_s.sum(dim=-1)
    mass = cums.gather(-1, (size - 1).clamp(min=0).unsqueeze(-1)).squeeze(-1)
    decided = (size > 0) & (mass >= top_p + NUCLEUS_SLACK)
    keep = torch.zeros_like(p, dtype=torch.bool).scatter_(-1, idx, in_s & (cums + neg < top_p))
    if not bool(decided.all()):
        rows = (~decided).nonzero().squeeze(-1)
        keep[rows] = _nucleus(p[rows], top_p)
    return keep


def install(model, temperature: float, top_p: float) -> bool:
    """Make `model.compute_logits` return processed sampling log-probabilities until `remove`."""
    if hasattr(model, _ATTR):
        remove(model)
    original = model.compute_logits
    state = {"calls": 0}

    def compute_logits(hidden_states, *args, **kwargs):
        logits = original(hidden_states, *args, **kwargs)
        if logits is None:  # a pipeline stage without the head
            return logits
        state["calls"] += 1
        return processed_logprobs(logits, temperature, top_p)

    model.compute_logits = compute_logits  # an instance attribute: shadows the class's method
    setattr(model, _ATTR, state)
    return True


def remove(model) -> int:
    """Restore the model's own `compute_logits`; the number of calls the hook served."""
    state = getattr(model, _ATTR, None)
    if state is None:
        return 0
    delattr(model, _ATTR)
    if "compute_logits" in vars(model):
        del model.compute_logits
    return int(state["calls"])
