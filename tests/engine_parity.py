"""The test columns every engine fills (issue 25, engine parity): what the offline engine writes
for a T = 0 and a T > 0 cell, the server engine writes too. Asserted on the offline engine's T > 0
test (tests/e2e/test_lossless_wiring.py) and on the server rehearsal (tests/e2e/test_rehearsal_engine.py)."""

from __future__ import annotations

# a speculative row at T = 0: the lossless comparison, the per-step breakdowns, the speedup CI, ITL
T0_COLUMNS = (
    "lossless_compared",
    "lossless_matches",
    "lossless_match_rate",
    "al_by_output_position",
    "speedup_ci_low",
    "speedup_ci_high",
    "itl_ms_median",
    "itl_per_token_ms_median",
)
# both rows at T > 0: the distribution test, and how the verifier's distributions were obtained
T_HOT_COLUMNS = (
    "sampling_p_value",
    "sampling_tv",
    "sampling_num_tokens",
    "sampling_min_detectable_tv",
    "sampling_rescore",
)


def _filled(value) -> bool:
    if value is None or (isinstance(value, float) and value != value):
        return False
    return len(value) > 0 if hasattr(value, "__len__") and not isinstance(value, str) else True


def assert_test_columns_filled(df) -> None:
    """Every T = 0 speculative row fills T0_COLUMNS; every T > 0 row, both arms, T_HOT_COLUMNS."""
    cold = df[(df["temperature"] == 0) & (df["mode"] == "speculative")]
    hot = df[df["temperature"] > 0]
    assert len(cold) and len(hot), "the parity check needs a T = 0 and a T > 0 cell"
    for cols, rows in ((T0_COLUMNS, cold), (T_HOT_COLUMNS, hot)):
        for _, r in rows.iterrows():
            empty = [c for c in cols if c not in r or not _filled(r[c])]
            assert not empty, (r["cell_id"], r["mode"], r["engine"], empty)


def chat_requests(tokenizer, prompts: list[str], max_tokens: int, prefix: str = "r") -> list:
    """One single-turn chat request per prompt, its ids from the tokenizer's chat template, ids
    `<prefix><i>`."""
    from harness.engine.base import GenRequest

    return [
        GenRequest(
            f"{prefix}{i}",
            tuple(
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": p}], tokenize=True, add_generation_prompt=True, return_dict=False
                )
            ),
            max_tokens,
        )
        for i, p in enumerate(prompts)
    ]
