"""The production vocabulary on a stand-in: Kimi-K2.5's 163,840 token ids, over a tokenizer the
pydoc corpus can train (docs/production-vocab.md).

A BPE trained to 163,840 tokens on a ~1 M-token corpus would be mostly tokens seen once or never,
and a bigram initialisation of that head needs a 163,840² matrix. So the stand-in keeps its trained
2,048-token BPE and gives it K2.5's id space: the special tokens keep their ids, the ordinary
tokens are spread evenly over the rest in rank order (so draft ids and verifier ids differ, and
d2t's offsets reach ~160,000, as K2.5's do), and every other id is a reserved token
`<|reserved_token_N|>` that no text encodes to (K2.5 itself reserves 256 such ids).

The model is the plain stand-in with its rows moved to their new ids, and one row `u` shared by
every reserved id, fitted so the reserved tokens together take as little probability as the plain
model's hidden states allow (fit_reserved_row). Its softmax over F equal reserved rows is exact at
the cost of the compact model: logsumexp(real logits, h·u + log F). Nothing else is retrained, so on
real tokens the padded stand-in predicts exactly what the plain one does (a fine-tune of the whole
model through that softmax cost ~40 min on 2 cores and left the reserved tokens 2.5 % of the mass;
the row alone leaves less, in seconds).
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


def padded_logits(model, batch, num_reserved: int):
    """The padded model's logits computed on the compact one (module doc): the real tokens' logits
    and one column for all reserved tokens together, h·u + log F with `u` = model.reserved_head."""
    import torch

    h = model.model(input_ids=batch).last_hidden_state
    shared = (h @ model.reserved_head).unsqueeze(-1) + math.log(num_reserved)
    return torch.cat([model.lm_head(h), shared], -1)


def fit_reserved_row(model, windows, num_reserved: int, steps: int = 300):
    """The shared reserved row that minimises the padded next-token loss with every other weight held
    (the compact model's predictions on real tokens stay exactly its own). Reserved tokens are never
    targets, so the loss's part that depends on u is, per position, log(1 + F·exp(h·u) / Z_real):
    the share of the likelihood the reserved tokens take. [PAD]'s row alone leaves them ~0.3 of the mass."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        h = model.model(input_ids=windows).last_hidden_state.flatten(0, 1).float()
        lse = torch.logsumexp(model.lm_head(h), -1)
    u = model.reserved_head.detach().clone().float().requires_grad_(True)
    opt = torch.optim.Adam([u], lr=0.05)
    with torch.enable_grad():  # whatever the caller's mode
        for _ in range(steps):
            loss = F.softplus(h @ u + math.log(num_reserved) - lse).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return u.detach()


def reserved_mass(model, windows, num_reserved: int) -> dict[str, float]:
    """The probability all reserved tokens together get, per position of `windows` (a served model
    would sample one that often at T = 1): mean, max, and the share of positions above 1e-3."""
    import torch

    with torch.no_grad():
        mass = padded_logits(model, windows, num_reserved).float().softmax(-1)[..., -1].flatten()
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
