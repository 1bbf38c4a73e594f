"""vLLM-CPU: RotaryEmbedding.forward_cpu mis-rotates a 3-D strided query (DeepSeek/Kimi MLA
attention passes q[..., nope:] of shape [tokens, heads, rope_dim]).

Standalone: `python repro.py` with vllm-cpu 0.32.0 installed (no model, no GPU). It applies
the same rotary embedding to the same query twice — through the CPU kernel
(`torch.ops._C.rotary_embedding`, what `forward_cpu` calls) and through the PyTorch reference
(`forward_native`) — once with a contiguous 2-D query (Llama's layout) and once with the 3-D
strided slice DeepSeek's attention passes. Expected: both agree in both layouts. Observed: the
2-D query agrees; the 3-D slice does not (most heads unrotated or rotated at wrong positions),
while the key comes out right.
Workaround: compilation_config={"custom_ops": ["all", "-rotary_embedding"]} (PyTorch rope).
Exit code 1 when the defect is present, 0 when fixed.
"""

import sys

import torch


DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def measure(rope_parameters: dict | None = None) -> dict[str, float]:
    """Max |CPU op - PyTorch reference| for a 2-D and a 3-D strided query (and their keys)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope

    torch.manual_seed(0)
    tokens, heads, nope, rope_dim = 10, 4, 64, 64
    with set_current_vllm_config(VllmConfig()):
        rope = get_rope(rope_dim, max_position=4096, is_neox_style=False,
                        rope_parameters=dict(rope_parameters or DEFAULT_ROPE), dtype=torch.float32)
    positions = torch.arange(tokens)

    def both(q, k):
        q_ref, k_ref = rope.forward_native(positions, q.clone(), k.clone())
        q_cpu, k_cpu = q.clone(), k.clone()
        out = rope.forward_cpu(positions, q_cpu, k_cpu)
        q_cpu, k_cpu = out if out is not None else (q_cpu, k_cpu)
        return (q_cpu - q_ref).abs().max().item(), (k_cpu - k_ref).abs().max().item()

    # Llama-style: contiguous [tokens, heads * rope_dim]
    q2 = torch.randn(tokens, heads * rope_dim)
    k2 = torch.randn(tokens, rope_dim)
    err_q2, err_k2 = both(q2, k2)
    # DeepSeek-style: q = [tokens, heads, nope + rope]; q_pe = q[..., nope:] (3-D, strided)
    q = torch.randn(tokens, heads, nope + rope_dim)
    q_pe = q[..., nope:]
    k_pe = torch.randn(tokens, 1, rope_dim)
    err_q3, err_k3 = both(q_pe, k_pe)
    return {"q2": err_q2, "k2": err_k2, "q3": err_q3, "k3": err_k3}


def main() -> int:
    e = measure()
    err_q2, err_k2, err_q3, err_k3 = e["q2"], e["k2"], e["q3"], e["k3"]
    print(f"2-D contiguous query: max |kernel - reference| q={err_q2:.2e} k={err_k2:.2e}")
    print(f"3-D strided query   : max |kernel - reference| q={err_q3:.2e} k={err_k3:.2e}")
    defect = err_q3 > 1e-4 and err_q2 < 1e-4
    print("DEFECT PRESENT: the CPU rotary kernel mishandles the 3-D strided query" if defect
          else "no defect: kernel and reference agree")
    return 1 if defect else 0


if __name__ == "__main__":
    sys.exit(main())
