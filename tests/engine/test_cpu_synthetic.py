"""vLLM's synthetic acceptance on the CPU engine (harness/engine/cpu_synthetic.py): the torch version
of the Triton kernel's SYNTHETIC_MODE branch, checked against that branch written as a loop."""

from __future__ import annotations

import torch

from harness.engine.cpu_synthetic import synthetic_greedy

PLACEHOLDER = -1


def reference(cu, drafts, argmax, bonus, is_greedy, max_spec_len, uniform, rates):
    """vllm/v1/sample/rejection_sampler.py rejection_greedy_sample_kernel, SYNTHETIC_MODE, per request."""
    out = torch.full((len(cu), max_spec_len + 1), PLACEHOLDER, dtype=torch.int32)
    for req in range(len(cu)):
        if is_greedy is not None and not bool(is_greedy[req]):
            continue
        start = 0 if req == 0 else int(cu[req - 1])
        n = int(cu[req]) - start
        rejected = False
        for pos in range(n):
            if rejected:
                break
            d, t = int(drafts[start + pos]), int(argmax[start + pos])
            accepted = float(uniform[start + pos]) < float(rates[pos]) and d >= 0
            out[req, pos] = d if accepted else t
            rejected = not accepted
        if not rejected:
            out[req, n] = int(bonus[req])
    return out


def test_matches_the_kernel_branch_on_random_batches():
    g = torch.Generator().manual_seed(0)
    for trial in range(200):
        batch, k = int(torch.randint(1, 6, (1,), generator=g)), int(torch.randint(1, 5, (1,), generator=g))
        n = torch.randint(0, k + 1, (batch,), generator=g)
        cu = torch.cumsum(n, 0).to(torch.int32)
        total = int(cu[-1])
        drafts = torch.randint(-1, 50, (total,), generator=g).to(torch.int32)
        argmax = torch.randint(0, 50, (total,), generator=g)
        bonus = torch.randint(0, 50, (batch, 1), generator=g)
        uniform = torch.rand(total, generator=g, dtype=torch.float64)
        rates = torch.sort(torch.rand(k, generator=g), descending=True).values.to(torch.float32)
        is_greedy = None if trial % 3 else torch.rand(batch, generator=g) < 0.7
        out = torch.full((batch, k + 1), PLACEHOLDER, dtype=torch.int32)
        synthetic_greedy(out, cu, drafts, argmax, bonus, is_greedy, k, uniform, rates)
        assert torch.equal(out, reference(cu, drafts, argmax, bonus, is_greedy, k, uniform, rates)), trial


def test_rate_one_accepts_every_draft_and_zero_none():
    cu = torch.tensor([3, 6], dtype=torch.int32)
    drafts = torch.tensor([5, 6, 7, 8, 9, 10], dtype=torch.int32)
    argmax = torch.tensor([1, 1, 1, 2, 2, 2])
    bonus = torch.tensor([[40], [41]])
    uniform = torch.full((6,), 0.5, dtype=torch.float64)
    out = torch.full((2, 4), PLACEHOLDER, dtype=torch.int32)
    synthetic_greedy(out, cu, drafts, argmax, bonus, None, 3, uniform, torch.ones(3))
    assert out.tolist() == [[5, 6, 7, 40], [8, 9, 10, 41]]
    out = torch.full((2, 4), PLACEHOLDER, dtype=torch.int32)
    synthetic_greedy(out, cu, drafts, argmax, bonus, None, 3, uniform, torch.zeros(3))
    assert out.tolist() == [[1, -1, -1, -1], [2, -1, -1, -1]]
