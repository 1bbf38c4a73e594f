"""A byte-level BPE tokenizer trained locally, with Kimi's chat-role special tokens.

Kimi-K2.5 ships a tiktoken tokenizer as remote code; the stand-in cannot fetch it, so it uses a
`tokenizers` BPE saved as a plain `PreTrainedTokenizerFast` (tokenizer.json), which both vLLM and
transformers load without remote code. The chat template follows Kimi's role markers.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = (
    "[PAD]",
    "[BOS]",
    "[EOS]",
    "[UNK]",
    "<|im_end|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "<|media_begin|>",
    "<|media_content|>",
    "<|media_end|>",
    "<|media_pad|>",
)
PAD, BOS, EOS, UNK, IM_END = 0, 1, 2, 3, 4
MEDIA_PAD = SPECIAL_TOKENS.index("<|media_pad|>")
# Kimi-K2.5's reasoning markers; a thinking stand-in adds them after the chat-role tokens.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'system' -%}<|im_system|>system<|im_middle|>{{ m['content'] }}<|im_end|>"
    "{%- elif m['role'] == 'user' -%}<|im_user|>user<|im_middle|>{{ m['content'] }}<|im_end|>"
    "{%- else -%}<|im_assistant|>assistant<|im_middle|>{{ m['content'] }}<|im_end|>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
)


# K2.5's way: thinking is on unless the request says `chat_template_kwargs={"thinking": false}`;
# off, the generation prompt closes an empty reasoning span so the model answers at once.
THINKING_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}",
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>"
    "{%- if thinking is defined and not thinking -%}<think></think>{%- else -%}<think>{%- endif -%}"
    "{%- endif -%}",
)


def train_tokenizer(documents: list[str], vocab_size: int, out_dir: Path, thinking: bool = False):
    """Train the BPE on `documents` and save it (tokenizer.json + config) into `out_dir`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS) + ([THINK_OPEN, THINK_CLOSE] if thinking else []),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(documents, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="[BOS]",
        eos_token="[EOS]",
        pad_token="[PAD]",
        unk_token="[UNK]",
        chat_template=THINKING_CHAT_TEMPLATE if thinking else CHAT_TEMPLATE,
        model_max_length=4096,
    )
    for i, t in enumerate(SPECIAL_TOKENS):
        assert fast.convert_tokens_to_ids(t) == i, f"special token {t} not at id {i}"
    fast.save_pretrained(str(out_dir))
    return fast
