"""Brief, deterministic pretraining so a stand-in behaves like a language model, not noise.

Random weights repeat one token. On 2 CPU cores only ~1-2 epochs of Python's bundled docs fit
in a couple of minutes, which from a random start leaves a model at the unigram plateau
(loss ~6.2, emitting newlines). So training starts from a *bigram initialisation*: the
embedding and lm_head are the two factors of a rank-`hidden` SVD of the corpus's centred
log-bigram matrix, i.e. the model starts as a bigram LM (loss ~5.8, greedy chains of real
words), and the transformer layers then learn context on top (loss ~3.1 after 150 steps,
language-like, prompt-dependent continuations). Half the documents are wrapped in the chat template (the
topic name as the user turn, the text as the assistant turn ending in <|im_end|>), so chat
prompts get an answer that ends by itself, as a served chat model's would.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import torch

from harness.errors import BadInput
from harness.hardware import cpu_compute_dtype
from harness.verifier.standins.specs import StandinSpec
from harness.verifier.standins.tokenizer import BOS, EOS, THINK_CLOSE, THINK_OPEN

# The reasoning span of a thinking stand-in: the same short plan every time, so that a model
# pretrained for a few minutes learns to open, fill and close it. Free-form spans (a document's
# first sentence; a plan naming the topic) were not closed after 150 steps: their ends are not
# predictable for so small a model.
THINKING_PLAN = "Let me think step by step. I recall the facts, then I answer."


def thinking_answer(text: str, think: bool) -> str:
    """An assistant turn in Kimi-K2.5's format: reasoning in <think>...</think>, then the answer;
    with thinking off the span is empty, as K2.5's template leaves it."""
    return THINK_OPEN + (THINKING_PLAN if think else "") + THINK_CLOSE + text


def build_samples(
    tokenizer, documents: list[tuple[str, str]], seed: int, thinking: bool = False, answers: bool = False
) -> list[list[int]]:
    """Token sequences: plain documents and chat-wrapped ones, in a seeded order. A thinking
    stand-in's chat answers think first (three in four) or carry an empty span (thinking off).
    `answers`: the documents are (prompt, answer) pairs, every one a chat turn with the prompt as
    the user's message (a pydoc document's chat turn asks with its title and first words)."""
    rng = random.Random(seed)
    out = []
    for i, (title, text) in enumerate(documents):
        if i % 2 and not answers:
            # verbose=False: whole documents, longer than model_max_length on purpose (pack() cuts them
            # into windows); transformers' "longer than the specified maximum" line would leak otherwise
            ids = [BOS] + tokenizer.encode(text, add_special_tokens=False, verbose=False) + [EOS]
        else:
            ask = title if answers else f"{title}: {' '.join(text.split()[:12])}"
            answer = thinking_answer(text, think=i % 8 != 0) if thinking else text
            msgs = [{"role": "user", "content": ask}, {"role": "assistant", "content": answer}]
            ids = tokenizer.apply_chat_template(
                msgs, tokenize=True, return_dict=False, tokenizer_kwargs={"verbose": False}
            )
            ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
        out.append(ids)
    rng.shuffle(out)
    return out


def bigram_init(model, windows: torch.Tensor, vocab_size: int) -> None:
    """Set embed_tokens and lm_head so that lm_head(embed(a)) ~ log P(b | a) (see module doc)."""
    stream = windows.flatten()
    counts = torch.full((vocab_size, vocab_size), 0.1)
    counts.index_put_((stream[:-1], stream[1:]), torch.ones(len(stream) - 1), accumulate=True)
    logp = torch.log(counts / counts.sum(1, keepdim=True))
    logp = logp - logp.mean(1, keepdim=True)  # logits are shift-invariant per row
    u, s, vh = torch.linalg.svd(logp)
    hidden = model.get_input_embeddings().weight.shape[1]
    emb = u[:, :hidden] * s[:hidden].sqrt()
    head = vh[:hidden].T * s[:hidden].sqrt()
    scale = emb.pow(2).mean(1).sqrt().mean()  # residual stream at ~unit RMS, as the norms expect
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(emb / scale)
        model.get_output_embeddings().weight.copy_(head * scale)


def pack(samples: list[list[int]], seq_len: int) -> torch.Tensor:
    stream = [t for s in samples for t in s]
    n = len(stream) // seq_len
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)


def pretrain(
    model,
    windows: torch.Tensor,
    spec: StandinSpec,
    on_step: Callable[[int, float], None] | None = None,
    long_windows: torch.Tensor | None = None,
) -> list[float]:
    """Train `model` in place for spec.pretrain_steps, then spec.long_steps on `long_windows` at the
    schedule's last learning rate; returns the loss per step."""
    g = torch.Generator().manual_seed(spec.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, spec.pretrain_steps // 10)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, spec.pretrain_steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    spec_bf16 = cpu_compute_dtype("bfloat16") == "bfloat16"  # float32 where bf16 is emulated
    losses: list[float] = []

    def train_on(data: torch.Tensor, steps: int, batch_size: int, advance_lr: bool) -> None:
        order, pos = torch.randperm(len(data), generator=g), 0
        for _ in range(steps):
            if pos + batch_size > len(order):
                order, pos = torch.randperm(len(data), generator=g), 0
            batch = data[order[pos : pos + batch_size]]
            pos += batch_size
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=spec_bf16):
                loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if advance_lr:
                sched.step()
            losses.append(loss.item())
            if on_step:
                on_step(len(losses) - 1, losses[-1])

    model.train()
    tail = long_windows if long_windows is not None and len(long_windows) else None
    if spec.long_steps and tail is None:
        # a spec fingerprinted with a tail must not be built without one
        raise BadInput(f"stand-in spec has a {spec.long_seq_len}-token tail but no long windows were given")
    train_on(windows, spec.pretrain_steps, spec.batch_size, advance_lr=True)
    if tail is not None and spec.long_steps:
        train_on(tail, spec.long_steps, spec.long_batch_size, advance_lr=False)
    model.eval()
    return losses
