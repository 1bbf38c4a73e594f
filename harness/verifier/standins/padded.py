"""The production vocabulary on a stand-in: Kimi-K2.5's 163,840 token ids, over a tokenizer the
pydoc corpus can train (docs/production-vocab.md).

A BPE trained to 163,840 tokens on a ~1 M-token corpus would be mostly tokens seen once or never,
and a bigram initialisation of that head needs a 163,840² matrix. So the stand-in keeps its trained
2,048-token BPE and gives it K2.5's id space: the special tokens keep their ids, the ordinary
tokens are spread evenly over the rest in rank order (so draft ids and verifier ids differ, and
d2t's offsets reach ~160,000, as K2.5's do), and every other id is a reserved token
`<|reserved_token_N|>` that no text encodes to (K2.5 itself reserves 256 such ids).

The model is the plain stand-in fine-tuned with the full 163,840-way softmax. That is exact at the
cost of the compact model: reserved rows start equal, never appear as inputs or targets, and so get
identical gradients and stay equal; the softmax over them is one shared row `u` counted F times,
logsumexp(real logits, h·u + log F).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

RESERVED = "<|reserved_token_{}|>"


def spread_ids(num_tokens: int, num_special: int, padded: int) -> list[int]:
    """The new id of each of the BPE's ids: specials keep theirs, the ordinary tokens spread evenly
    over [num_special, padded) in their rank order."""
    stride = (padded - num_special) // (num_tokens - num_special)
    return [i if i < num_special else num_special + (i - num_special) * stride for i in range(num_tokens)]


def pad_tokenizer(folder: Path, padded: int) -> list[int]:
    """Rewrite folder/tokenizer.json in the padded id space; the new id of each old id."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text())
    vocab: dict[str, int] = data["model"]["vocab"]
    specials = sorted(a["id"] for a in data["added_tokens"])
    assert specials == list(range(len(specials))), "the stand-in's special tokens come first"
    new_ids = spread_ids(len(vocab), len(specials), padded)
    moved = {tok: new_ids[i] for tok, i in vocab.items()}
    taken = set(moved.values())
    moved.update({RESERVED.format(i): i for i in range(padded) if i not in taken})
    data["model"]["vocab"] = moved  # merges name tokens by text: they stay as they are
    path.write_text(json.dumps(data, ensure_ascii=False))
    return new_ids


def reserved_loss(model, batch, num_reserved: int):
    """Next-token cross entropy over the full padded vocabulary (module doc): the compact model's
    logits and the shared reserved row `model.reserved_head`, counted num_reserved times."""
    import torch
    import torch.nn.functional as F

    h = model.model(input_ids=batch).last_hidden_state
    full = torch.cat([model.lm_head(h), (h @ model.reserved_head).unsqueeze(-1) + math.log(num_reserved)], -1)
    return F.cross_entropy(full[:, :-1].reshape(-1, full.shape[-1]).float(), batch[:, 1:].reshape(-1))


def reserved_mass(model, windows, num_reserved: int) -> dict[str, float]:
    """The probability all reserved tokens together get, per position of `windows` (a served model
    would sample one that often at T = 1): mean, max, and the share of positions above 1e-3."""
    import torch

    with torch.no_grad():
        h = model.model(input_ids=windows).last_hidden_state
        full = torch.cat([model.lm_head(h), (h @ model.reserved_head).unsqueeze(-1) + math.log(num_reserved)], -1)
        mass = full.float().softmax(-1)[..., -1].flatten()
    return {
        "mean": float(mass.mean()),
        "max": float(mass.max()),
        "share_above_1e-3": float((mass > 1e-3).float().mean()),
        "positions": mass.numel(),
    }


def padded_state_dict(model, new_ids: list[int], padded: int) -> dict:
    """The compact model's weights in the padded id space: real rows moved to their new ids, every
    reserved lm_head row the shared one, every reserved embedding row the mean (never an input)."""
    import torch

    sd = {k: v.detach() for k, v in model.state_dict().items() if k != "reserved_head"}
    emb, head = sd["model.embed_tokens.weight"], sd["lm_head.weight"]
    idx = torch.tensor(new_ids)
    big_emb = emb.mean(0).repeat(padded, 1)
    big_head = model.reserved_head.detach().repeat(padded, 1)
    big_emb[idx], big_head[idx] = emb, head
    sd["model.embed_tokens.weight"], sd["lm_head.weight"] = big_emb, big_head
    return sd
