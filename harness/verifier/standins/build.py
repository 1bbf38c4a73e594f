"""Build a stand-in verifier: tokenizer, seeded init, brief pretraining, checkpoint in the real
model's layout. Built once per spec into a cache folder, atomically (a build killed midway
leaves nothing that looks finished).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.paths import cache_root
from harness.provenance import build_once
from harness.verifier.standins.corpus import corpus_documents, corpus_fingerprint, corpus_topics
from harness.verifier.standins.specs import (
    VISION_HIDDEN,
    VISION_INTERMEDIATE,
    VISION_POS,
    StandinSpec,
    checkpoint_config,
    hf_text_config_dict,
)
from harness.verifier.standins.tokenizer import EOS, IM_END, train_tokenizer

STANDIN_META = "standin.json"
PROBE_PROMPTS = (
    "The for statement",
    "Exceptions are raised when",
    "A class definition defines",
    "The import system",
    "Strings are immutable sequences",
    "When a function is called",
)


def standin_dir(spec: StandinSpec, root: Path | None = None) -> Path:
    return (
        (root or cache_root()) / "standins" / f"{spec.arch}-{spec.fingerprint(corpus_fingerprint(spec.pretrain_text))}"
    )


def is_complete(folder: Path) -> bool:
    return (folder / STANDIN_META).is_file()


def ensure_standin(spec: StandinSpec, root: Path | None = None, log: Callable[[str], None] = lambda s: None) -> Path:
    """The cached stand-in for `spec`, building it first if needed."""
    return build_once(standin_dir(spec, root), is_complete, lambda tmp: build_standin(spec, tmp, log=log))


def _seeded_model(spec: StandinSpec, out: Path, docs: list[str]):
    """The stand-in's tokenizer (written to `out`) and its seeded, untrained model."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.verifier.hf_text import hf_text_config

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(docs, spec.vocab_size, out, thinking=spec.thinking)
    torch.manual_seed(spec.seed)
    return tokenizer, AutoModelForCausalLM.from_config(hf_text_config(hf_text_config_dict(spec)), dtype=torch.float32)


def build_structure(spec: StandinSpec, out: Path) -> Path:
    """The stand-in's checkpoint as the real build writes it (config, tokenizer, weight names,
    shapes and shards), seeded but not pretrained: what a dry run reads, in seconds, where the
    build with its pretraining takes minutes. Not a stand-in to serve (no STANDIN_META)."""
    _, model = _seeded_model(spec, out, corpus_documents(spec.pretrain_text))
    if spec.padded_vocab_size:
        from harness.verifier.standins.padded import pad_tokenizer

        pad_tokenizer(out, spec.padded_vocab_size)
    write_checkpoint(spec, model, out)
    return out


def _corpus_samples(spec: StandinSpec, tokenizer) -> list[list[int]]:
    from harness.verifier.standins.pretrain import build_samples

    answers = spec.pretrain_text != "pydoc"  # (prompt, answer) pairs: every one a chat turn
    return build_samples(tokenizer, corpus_topics(spec.pretrain_text), spec.seed, spec.thinking, answers)


# bf16 matmuls split their reductions by the number of threads, so the stand-in's weights (and every
# margin measured on it) depend on it: every build runs on BUILD_THREADS whatever the machine has or
# a process was given (a test worker pinned to one core, a 64-core host), and the same spec builds the
# same stand-in. Measured: the plain Kimi stand-in built on 1 thread is another model, whose CI-size
# draft overfits (held-out loss 1.40x the training loss, against 1.25); 2 threads on one core rebuild
# the 2-core build bit for bit, in the same 206-211 s as 1 thread.
BUILD_THREADS = 2


@contextlib.contextmanager
def _build_threads() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(BUILD_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def build_standin(spec: StandinSpec, out: Path, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    with _build_threads():
        return build_padded_standin(spec, out, log) if spec.padded_vocab_size else _build_pretrained(spec, out, log)


def _build_pretrained(spec: StandinSpec, out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from harness.verifier.standins.pretrain import bigram_init, pack, pretrain

    t0 = time.perf_counter()
    tokenizer, model = _seeded_model(spec, out, corpus_documents(spec.pretrain_text))
    samples = _corpus_samples(spec, tokenizer)
    windows = pack(samples, spec.seq_len)
    bigram_init(model, windows, spec.vocab_size)
    steps = spec.pretrain_steps + spec.long_steps
    tail = f", then {spec.long_steps} at {spec.long_seq_len}-token windows" if spec.long_steps else ""
    log(
        f"pretraining {spec.arch} ({spec.num_layers} layers) for {spec.pretrain_steps} steps{tail} "
        f"on {windows.numel():,} tokens of {spec.pretrain_text}"
    )
    losses = pretrain(
        model,
        windows,
        spec,
        on_step=lambda s, loss: log(f"step {s + 1}/{steps} loss {loss:.3f}") if (s + 1) % 50 == 0 else None,
        long_windows=pack(samples, spec.long_seq_len) if spec.long_steps else None,
    )
    quality = greedy_quality(model, tokenizer)
    write_checkpoint(spec, model, out)
    meta = {
        "arch": spec.arch,
        "spec": spec.__dict__,
        "fingerprint": spec.fingerprint(corpus_fingerprint(spec.pretrain_text)),
        "num_params": sum(p.numel() for p in model.parameters()),
        "pretrain_tokens": spec.pretrain_steps * spec.batch_size * spec.seq_len
        + spec.long_steps * spec.long_batch_size * spec.long_seq_len,
        "loss_first": losses[0],
        "loss_last": sum(losses[-10:]) / min(10, len(losses)),
        # the main schedule's last loss, on its short windows (comparable with stand-ins without a tail)
        "loss_last_short": sum(losses[: spec.pretrain_steps][-10:]) / min(10, spec.pretrain_steps),
        "build_s": round(time.perf_counter() - t0, 1),
        "torch_threads": BUILD_THREADS,
        "quality": quality,
    }
    (out / STANDIN_META).write_text(json.dumps(meta, indent=2))
    return meta


def build_padded_standin(spec: StandinSpec, out: Path, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """The stand-in with spec.padded_vocab_size token ids: the plain stand-in of the same spec (built
    or cached), its tokenizer spread over the padded ids, one shared reserved row fitted (padded.py)."""
    import shutil
    from dataclasses import replace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.verifier.hf_text import hf_text_config, load_text_model
    from harness.verifier.layout import resolve_layout
    from harness.verifier.standins.padded import fit_reserved_row, pad_tokenizer, padded_state_dict, reserved_mass
    from harness.verifier.standins.pretrain import pack
    from harness.verifier.standins.tokenizer import PAD

    t0 = time.perf_counter()
    padded, base = spec.padded_vocab_size, ensure_standin(replace(spec, padded_vocab_size=0), log=log)
    model = load_text_model(resolve_layout(base))
    windows = pack(_corpus_samples(spec, AutoTokenizer.from_pretrained(base)), spec.seq_len)
    num_reserved = padded - spec.vocab_size
    windows, held = windows[:-8], windows[-8:]  # held out: what the reserved tokens get, before and after
    # reserved tokens start from [PAD]'s row (a token the corpus never has), then fitted
    model.register_parameter("reserved_head", torch.nn.Parameter(model.lm_head.weight[PAD].detach().clone()))
    before = reserved_mass(model, held, num_reserved)
    log(f"fitting the shared row of {num_reserved:,} reserved ids ({padded:,} in all)")
    sample = windows[torch.randperm(len(windows), generator=torch.Generator().manual_seed(spec.seed))[:32]]
    with torch.no_grad():
        model.reserved_head.copy_(fit_reserved_row(model, sample, num_reserved))
    after = reserved_mass(model, held, num_reserved)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(base / name, out / name)
    new_ids = pad_tokenizer(out, padded)
    big = AutoModelForCausalLM.from_config(hf_text_config(hf_text_config_dict(spec)), dtype=torch.float32)
    big.load_state_dict(padded_state_dict(model, new_ids, padded))
    big.eval()
    write_checkpoint(spec, big, out)
    meta = {
        "arch": spec.arch,
        "spec": spec.__dict__,
        "fingerprint": spec.fingerprint(corpus_fingerprint(spec.pretrain_text)),
        "base": base.name,
        "num_params": sum(p.numel() for p in big.parameters()),
        "vocab": {"ids": padded, "ordinary_and_special": spec.vocab_size, "reserved": num_reserved},
        "reserved_mass_before": before,
        "reserved_mass": after,
        "build_s": round(time.perf_counter() - t0, 1),
        "quality": greedy_quality(big, AutoTokenizer.from_pretrained(out)),
    }
    (out / STANDIN_META).write_text(json.dumps(meta, indent=2))
    return meta


def greedy_quality(model, tokenizer, n_tokens: int = 64) -> dict[str, Any]:
    """Does it behave like a language model? Greedy continuations of probe prompts.

    distinct_token_ratio = distinct tokens / generated tokens, averaged over prompts (a model
    repeating one token scores 1/n); `distinct_continuations` counts different outputs.
    """
    import torch

    conts = []
    with torch.no_grad():
        for p in PROBE_PROMPTS:
            ids = torch.tensor([tokenizer.encode(p, add_special_tokens=False)])
            out = model.generate(ids, max_new_tokens=n_tokens, min_new_tokens=n_tokens, do_sample=False, pad_token_id=0)
            conts.append(out[0, ids.shape[1] :].tolist())
    ratios = [len(set(c)) / len(c) for c in conts]
    return {
        "distinct_token_ratio": round(sum(ratios) / len(ratios), 3),
        "min_distinct_token_ratio": round(min(ratios), 3),
        "distinct_continuations": len({tuple(c) for c in conts}),
        "num_prompts": len(conts),
        "samples": {p: tokenizer.decode(c)[:200] for p, c in zip(PROBE_PROMPTS[:3], conts)},
    }


def _checkpoint_tensors(spec: StandinSpec, model) -> dict[str, Any]:
    """The state dict under the real checkpoint's names: per-expert tensors, Kimi's prefix,
    and (for Kimi) a small vision tower and projector as vLLM loads them."""
    import torch

    sd: dict[str, torch.Tensor] = {}
    for key, t in model.state_dict().items():
        # transformers 5 fuses experts into 3-D tensors; real checkpoints store one per expert.
        if key.endswith("mlp.experts.gate_up_proj"):
            base, inter = key[: -len("gate_up_proj")], t.shape[1] // 2
            for e in range(t.shape[0]):
                sd[f"{base}{e}.gate_proj.weight"] = t[e, :inter]
                sd[f"{base}{e}.up_proj.weight"] = t[e, inter:]
        elif key.endswith("mlp.experts.down_proj"):
            base = key[: -len("down_proj")]
            for e in range(t.shape[0]):
                sd[f"{base}{e}.down_proj.weight"] = t[e]
        else:
            sd[key] = t
    if spec.arch != "kimi-k2.5":
        return sd
    sd = {"language_model." + k: v for k, v in sd.items()}
    g = torch.Generator().manual_seed(spec.seed + 1)
    h, i, merged = VISION_HIDDEN, VISION_INTERMEDIATE, VISION_HIDDEN * 4

    def rnd(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    vt = "vision_tower."
    sd.update(
        {
            vt + "patch_embed.proj.weight": rnd(h, 3, 14, 14),
            vt + "patch_embed.proj.bias": rnd(h),
            vt + "patch_embed.pos_emb.weight": rnd(VISION_POS, VISION_POS, h),
            vt + "encoder.final_layernorm.weight": torch.ones(h),
            vt + "encoder.final_layernorm.bias": torch.zeros(h),
            "mm_projector.pre_norm.weight": torch.ones(h),
            "mm_projector.pre_norm.bias": torch.zeros(h),
            "mm_projector.proj.0.weight": rnd(merged, merged),
            "mm_projector.proj.0.bias": rnd(merged),
            "mm_projector.proj.2.weight": rnd(spec.hidden_size, merged),
            "mm_projector.proj.2.bias": rnd(spec.hidden_size),
        }
    )
    b = vt + "encoder.blocks.0."
    sd.update(
        {
            b + "norm0.weight": torch.ones(h),
            b + "norm0.bias": torch.zeros(h),
            b + "norm1.weight": torch.ones(h),
            b + "norm1.bias": torch.zeros(h),
            b + "wqkv.weight": rnd(3 * h, h),
            b + "wqkv.bias": rnd(3 * h),
            b + "wo.weight": rnd(h, h),
            b + "wo.bias": rnd(h),
            b + "mlp.fc0.weight": rnd(i, h),
            b + "mlp.fc0.bias": rnd(i),
            b + "mlp.fc1.weight": rnd(h, i),
            b + "mlp.fc1.bias": rnd(h),
        }
    )
    return sd


def write_sharded(tensors: dict[str, Any], out: Path, num_shards: int) -> None:
    """Write bf16 safetensors: one model.safetensors, or num_shards files + the index."""
    import torch
    from safetensors.torch import save_file

    keys = sorted(tensors)
    as_bf16 = {k: tensors[k].detach().to(torch.bfloat16).contiguous() for k in keys}
    if num_shards <= 1:
        save_file(as_bf16, str(out / "model.safetensors"), metadata={"format": "pt"})
        return
    per = -(-len(keys) // num_shards)
    weight_map, total = {}, 0
    for s in range(num_shards):
        name = f"model-{s + 1:05d}-of-{num_shards:05d}.safetensors"
        part = {k: as_bf16[k] for k in keys[s * per : (s + 1) * per]}
        save_file(part, str(out / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, name))
        total += sum(t.numel() * t.element_size() for t in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def write_checkpoint(spec: StandinSpec, model, out: Path) -> None:
    shards = {"kimi-k2.5": 4, "deepseek-v3": 2, "llama": 1}[spec.arch]
    write_sharded(_checkpoint_tensors(spec, model), out, shards)
    (out / "config.json").write_text(json.dumps(checkpoint_config(spec), indent=2))
    gen = {"bos_token_id": 1, "eos_token_id": [EOS, IM_END], "do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2))
    if spec.arch == "kimi-k2.5":
        # vLLM's Kimi-K2.5 loads an image processor even for text prompts.
        media = {
            "in_patch_limit": 4096,
            "patch_size": 14,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "merge_kernel_size": 2,
            "fixed_output_tokens": None,
            "patch_limit_on_one_side": 512,
            "in_patch_limit_each_frame": 4096,
            "in_patch_limit_video": None,
            "sample_fps": 2.0,
            "max_num_frames_each_video": None,
            "temporal_merge_kernel_size": 4,
            "timestamp_mode": "hh:mm:ss.fff",
            "config_type": "media_proc.processors.moonvit.MoonViTMediaProcessorConfig",
        }
        (out / "preprocessor_config.json").write_text(json.dumps({"media_proc_cfg": media}, indent=2))
    (out / "README.md").write_text(
        f"# Stand-in verifier: {spec.arch}\n\nBuilt locally by `harness verifier make-standin`; "
        "tiny, architecture-faithful, briefly pretrained on Python's bundled docs. Not a real model.\n"
    )
