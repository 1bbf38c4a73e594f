"""The padded vocabulary's pieces on a tiny model and tokenizer (no build): the id spread, the
tokenizer in the padded id space, and the claim the build rests on — the compact loss with one shared
reserved row is the full padded softmax's loss, exactly."""

from __future__ import annotations

import json

import pytest

from harness.errors import BadInput
from harness.verifier.standins.padded import (
    RESERVED,
    pad_tokenizer,
    padded_logits,
    padded_state_dict,
    reserved_mass,
    spread_ids,
)
from harness.verifier.standins.specs import spec_for


def test_spread_keeps_specials_and_order_and_stays_in_range():
    ids = spread_ids(2048, 13, 163840)
    assert ids[:13] == list(range(13))
    assert ids == sorted(ids) and len(set(ids)) == 2048
    assert ids[-1] < 163840 and ids[-1] > 160_000


def test_spec_padded_vocab_is_the_checkpoints_and_keeps_old_fingerprints():
    from harness.verifier.standins.specs import checkpoint_config

    plain, padded = spec_for("kimi-k2.5"), spec_for("kimi-k2.5", padded_vocab_size=163840)
    assert checkpoint_config(padded)["text_config"]["vocab_size"] == 163840
    assert checkpoint_config(plain)["text_config"]["vocab_size"] == plain.vocab_size == padded.vocab_size
    assert plain.fingerprint("c") != padded.fingerprint("c")
    with pytest.raises(BadInput, match="padded_vocab_size 1000 must exceed vocab_size 2048"):
        spec_for("kimi-k2.5", padded_vocab_size=1000)


def test_the_padded_tokenizer_encodes_and_decodes_as_before(tmp_path):
    from transformers import AutoTokenizer

    from harness.verifier.standins.tokenizer import train_tokenizer

    docs = ["The for statement iterates over the items of a sequence."] * 20 + ["Exceptions are raised."] * 20
    small = train_tokenizer(docs, 300, tmp_path)
    text = "The for statement raised exceptions."
    before = small.encode(text, add_special_tokens=False)
    new_ids = pad_tokenizer(tmp_path, 5000)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert len(tok) == 5000
    after = tok.encode(text, add_special_tokens=False)
    assert after == [new_ids[i] for i in before] and tok.decode(after) == text
    free = next(i for i in range(5000) if i not in set(new_ids))
    assert tok.convert_ids_to_tokens(free) == RESERVED.format(free)
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False).startswith("<|im_user|>")
    assert json.loads((tmp_path / "tokenizer.json").read_text())["added_tokens"][0]["id"] == 0


def _tiny_model(vocab: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(cfg).eval()


def test_the_shared_reserved_row_is_the_full_softmax_exactly():
    import torch

    compact, padded = 40, 1000
    model = _tiny_model(compact)
    model.register_parameter("reserved_head", torch.nn.Parameter(torch.randn(32)))
    new_ids = spread_ids(compact, 4, padded)
    big = _tiny_model(padded)
    big.load_state_dict(padded_state_dict(model, new_ids, padded))
    batch = torch.randint(0, compact, (2, 12))
    with torch.no_grad():
        want = big(input_ids=torch.tensor(new_ids)[batch], labels=torch.tensor(new_ids)[batch]).loss
        full = padded_logits(model, batch, padded - compact)
        got = torch.nn.functional.cross_entropy(full[:, :-1].reshape(-1, full.shape[-1]), batch[:, 1:].reshape(-1))
        assert torch.allclose(got, want, atol=1e-5), (got, want)
        logits = big(input_ids=torch.tensor(new_ids)[batch]).logits.softmax(-1)
    reserved = torch.ones(padded, dtype=torch.bool)
    reserved[new_ids] = False
    mass = reserved_mass(model, batch, padded - compact)
    assert mass["max"] == pytest.approx(float(logits[..., reserved].sum(-1).max()), rel=1e-4)


def test_the_fitted_reserved_row_takes_the_reserved_tokens_mass_away():
    import torch

    from harness.verifier.standins.padded import fit_reserved_row

    model = _tiny_model(40)
    model.register_parameter("reserved_head", torch.nn.Parameter(torch.zeros(32)))
    batch = torch.randint(0, 40, (4, 16))
    before = reserved_mass(model, batch, 10_000)["mean"]
    with torch.no_grad():
        model.reserved_head.copy_(fit_reserved_row(model, batch, 10_000))
    after = reserved_mass(model, batch, 10_000)["mean"]
    assert before > 0.9 and after < 0.1 * before, (before, after)
