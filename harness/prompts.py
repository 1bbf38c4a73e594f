"""Prompt records, shared by training prompts and bench suites.

A JSONL line is one of:
  {"id": ..., "prompt": "raw text"}                              completion-style, sent as is
  {"id": ..., "messages": [{"role": "user", "content": ...}, …]}  OpenAI chat; the verifier's
                                                                  chat template renders it
  {"id": ..., "turns": ["first user turn", "second", …]}         MT-Bench multi-turn: each turn's
                                                                  answer is generated and fed back
Any malformed line is reported as file:line with what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import BadInput

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class PromptRecord:
    id: str
    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    turns: tuple[str, ...] | None = None
    # Extra chat-template variables, e.g. (("thinking", False),) for Kimi-K2.5's instant mode;
    # empty: the template's defaults.
    template_kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def num_turns(self) -> int:
        return len(self.turns) if self.turns else 1

    def user_texts(self) -> list[str]:
        if self.prompt is not None:
            return [self.prompt]
        if self.turns:
            return list(self.turns)
        return [m["content"] for m in self.messages or () if m["role"] == "user"]

    def first_messages(self) -> list[dict[str, str]] | None:
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        if self.turns:
            return [{"role": "user", "content": self.turns[0]}]
        return None


def parse_record(obj: Any, where: str, fallback_id: str) -> PromptRecord:
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(obj).__name__}")
    rid = str(obj.get("id", fallback_id))
    kinds = [k for k in KINDS if k in obj]
    if len(kinds) != 1:
        raise BadInput(f"{where}: needs exactly one of 'prompt', 'messages' or 'turns' (found {kinds or 'none'})")
    kind = kinds[0]
    value = obj[kind]
    if kind == "prompt":
        if not isinstance(value, str) or not value.strip():
            raise BadInput(f"{where}: 'prompt' must be a non-empty string")
        return PromptRecord(rid, prompt=value)
    if kind == "turns":
        if not isinstance(value, list) or not value or not all(isinstance(t, str) and t.strip() for t in value):
            raise BadInput(f"{where}: 'turns' must be a non-empty list of non-empty strings")
        return PromptRecord(rid, turns=tuple(value))
    if not isinstance(value, list) or not value:
        raise BadInput(f"{where}: 'messages' must be a non-empty list")
    msgs = []
    for j, m in enumerate(value):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise BadInput(f"{where}: messages[{j}] needs a role in {ROLES} and string content")
        msgs.append({"role": m["role"], "content": m["content"]})
    if msgs[-1]["role"] != "user":
        raise BadInput(f"{where}: the last message must be the user's (the model answers it)")
    return PromptRecord(rid, messages=tuple(msgs))


KINDS = ("prompt", "messages", "turns")


def apply_field_map(obj: dict[str, Any], field_map: dict[str, str]) -> dict[str, Any]:
    """`obj` with its fields renamed by `field_map`. Where the map names the prompt's field (one of
    KINDS), the record's other prompt-shaped fields are dropped: UltraChat rows carry both `prompt`
    and `messages`, and {"prompt": "prompt"} says which one to read."""
    out = {field_map.get(k, k): v for k, v in obj.items()}
    chosen = {field_map[k] for k in field_map if k in obj} & set(KINDS)
    if chosen:
        out = {k: v for k, v in out.items() if k not in KINDS or k in chosen}
    return out


def load_jsonl(path: Path, field_map: dict[str, str] | None = None) -> list[PromptRecord]:
    """Parse a prompt file; every problem names file:line. `field_map` renames source fields
    (e.g. {"question": "prompt"}) before parsing."""
    if not path.is_file():
        raise BadInput(f"{path}: prompt file not found")
    records: list[PromptRecord] = []
    seen: set[str] = set()
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BadInput(
                    f"{where}: not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1}); "
                    "save the file as UTF-8"
                ) from e
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadInput(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from e
            if field_map and isinstance(obj, dict):
                obj = apply_field_map(obj, field_map)
            rec = parse_record(obj, where, fallback_id=f"{path.stem}-{lineno}")
            if rec.id in seen:
                raise BadInput(f"{where}: duplicate id {rec.id!r}")
            seen.add(rec.id)
            records.append(rec)
    if not records:
        raise BadInput(f"{path}: no prompts in the file")
    return records


def normalize_text(s: str) -> str:
    return " ".join(s.lower().split())


def render(tokenizer, record: PromptRecord, history: list[dict[str, str]] | None = None) -> list[int]:
    """Token ids for the model's next answer: raw prompts as is, chats through the template.
    `history` replaces the messages for later MT-Bench turns."""
    # verbose=False: callers measure the ids against engine.max_model_len themselves (check_prompts_fit
    # refuses, the bench skips), so transformers' "longer than the specified maximum sequence length"
    # warning on a prompt past the tokenizer's model_max_length is noise in the job's output
    if record.prompt is not None and history is None:
        return tokenizer.encode(record.prompt, add_special_tokens=True, verbose=False)
    msgs = history if history is not None else record.first_messages()
    ids = tokenizer.apply_chat_template(
        msgs,
        tokenize=True,
        add_generation_prompt=True,
        return_dict=False,
        tokenizer_kwargs={"verbose": False},
        **dict(record.template_kwargs),
    )
    if isinstance(ids, dict):
        ids = ids["input_ids"]
    return list(ids)


END_THINK = "</think>"  # Kimi-K2.5's end of thinking (a single special token in its vocabulary)


def end_think_token(tokenizer) -> int | None:
    """The `</think>` token id where the tokenizer has it as a single token (K2.5's), else None.
    Building a vocabulary dict is not free (163,840 entries for K2.5): look it up once per tokenizer."""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    return vocab.get(END_THINK)


def with_answer(tokenizer, messages: list[dict[str, str]], output_ids, end_think: int | None) -> list[dict[str, str]]:
    """`messages` followed by the model's answer as the next turn's history holds it: the bench's
    later turns and the training conversations' alike. The answer is what a client of the served
    model gets as `content` and sends back: its text, special tokens dropped, and for an output that
    closed a thinking segment only what follows `</think>` (vLLM's reasoning parser, which the
    production recipe runs, returns the thinking as `reasoning_content` apart, and Moonshot's API
    ignores historical reasoning by default). An output that never closed its thinking (cut at the
    token limit) is fed back whole: it cannot be told from an answer without thinking. `end_think`:
    `end_think_token(tokenizer)`, or None where the prompt turned thinking off (a stray `</think>` is
    then part of the answer)."""
    ids = list(output_ids)
    if end_think is not None and end_think in ids:
        ids = ids[ids.index(end_think) + 1 :]
    answer = tokenizer.decode(ids, skip_special_tokens=True)
    return [*messages, {"role": "assistant", "content": answer}]


def load_hf_prompts(spec: str, field_map: dict[str, str], limit: int | None) -> list[PromptRecord]:
    """`hf:<dataset>[:<split>]` through `datasets` (needs the network)."""
    name, _, split = spec.removeprefix("hf:").partition(":")
    try:
        import datasets

        ds = datasets.load_dataset(name, split=split or "train")
    except Exception as e:  # noqa: BLE001 - any hub/network failure is the same advice
        raise BadInput(
            f"{spec}: cannot load Hugging Face dataset {name!r} ({type(e).__name__}: {e}); "
            "online access is needed, or export it to JSONL and pass the file"
        ) from e
    out: list[PromptRecord] = []
    for i, row in enumerate(ds):
        if limit is not None and len(out) >= limit:
            break
        obj = {k: v for k, v in apply_field_map(dict(row), field_map).items() if k in ("id", *KINDS)}
        out.append(parse_record(obj, f"{spec}[{i}]", fallback_id=f"{name}-{i}"))
    return out
