"""The offline engine's pipe to its host child (harness/engine/offline.py and offline_host.py), without vLLM: the
host's serving loop runs in a thread on one end of a real multiprocessing pipe (messages are
pickled as between processes), with vLLM's calls replaced by stand-ins."""

from __future__ import annotations

import multiprocessing as mp
import threading

import pytest

from harness.engine import offline, offline_calls, offline_host
from harness.engine.base import GenOutput, GenRequest, LayerStateReader, Rescorer, Sampling
from harness.engine.counters import SpecCounters, SpecSummary
from harness.engine.offline_protocol import Closed
from harness.errors import InfraError


class _Proc:
    exitcode = None

    def is_alive(self) -> bool:
        return True


@pytest.fixture
def engine(monkeypatch, tmp_path):
    seen: list[tuple] = []

    def run_batch(llm, requests, sampling, concurrency, timeout_s):
        seen.append(("generate", sampling, concurrency, timeout_s))
        return [
            GenOutput(r.request_id, len(r.prompt_token_ids), [7, 8], spec=SpecSummary(1, 1, 2, 2, (1,), (2,)))
            for r in requests
        ]

    def rescore(llm, sequences, top=None):
        if not sequences:
            raise ValueError("nothing to rescore")
        return [[{5: -0.5}] for _ in sequences]

    monkeypatch.setattr(offline_calls, "run_batch", run_batch)
    monkeypatch.setattr(offline_calls, "rescore", rescore)
    monkeypatch.setattr(offline_calls, "layer_states", lambda llm, ids, layers: {i: len(ids) for i in layers})
    monkeypatch.setattr(offline_host, "counters_from_offline", lambda m: (SpecCounters(3, 6, 2, (2,)), {}))

    class _LLM:
        def get_metrics(self):
            return []

    parent, child = mp.Pipe()

    def host():  # what offline_host.host does around serve once an engine is up
        offline_host.serve(child, _LLM(), 42.0)
        try:
            child.send(Closed())
        except OSError:  # the test closed its end without closing the engine
            pass

    t = threading.Thread(target=host, daemon=True)
    t.start()
    eng = object.__new__(offline.OfflineEngine)
    eng._conn, eng._proc, eng.log_path, eng.info = parent, _Proc(), tmp_path / "log", {}
    eng._host = None
    yield eng, seen, t
    parent.close()


def test_requests_and_replies_cross_the_pipe(engine):
    eng, seen, _ = engine
    res = eng.generate([GenRequest("a#0", (1, 2, 3), 4)], Sampling(temperature=0.5), 2)
    assert [o.output_token_ids for o in res.outputs] == [[7, 8]]
    assert res.outputs[0].spec == SpecSummary(1, 1, 2, 2, (1,), (2,))
    assert res.counters == SpecCounters(0, 0, 0, (0,))  # the delta of two equal readings
    assert seen == [("generate", Sampling(temperature=0.5), 2, 42.0)]  # None: the engine's timeout
    eng.generate([GenRequest("b#0", (1,), 4)], Sampling(), 1, timeout_s=5.0)
    assert seen[-1][-1] == 5.0
    assert eng.rescore([([1, 2], 1)]) == [[{5: -0.5}]]
    assert eng.layer_states([1, 2, 3], [0, 2]) == {0: 3, 2: 3}


def test_a_failure_in_the_host_is_infrastructure_naming_the_request(engine):
    eng, _, _ = engine
    with pytest.raises(InfraError, match=r"failed in rescore: ValueError: nothing to rescore"):
        eng.rescore([])
    assert eng.rescore([([1], 0)]) == [[{5: -0.5}]]  # the host serves on


def test_close_hands_a_healthy_host_back(engine, monkeypatch):
    eng, _, t = engine
    idle: list = []
    monkeypatch.setattr(offline, "_IDLE", idle)
    eng._host = "host"
    eng.close()
    t.join(5)
    assert not t.is_alive() and idle == ["host"]


def test_the_engines_declare_what_they_can_do():
    assert issubclass(offline.OfflineEngine, Rescorer) and issubclass(offline.OfflineEngine, LayerStateReader)
    from harness.engine.server import AttachedEngine, ServerEngine

    for cls in (ServerEngine, AttachedEngine):  # servers re-score through prompt_logprobs; no worker probe
        assert issubclass(cls, Rescorer) and not issubclass(cls, LayerStateReader)


def test_spec_summary_reads_both_of_vllms_surfaces():
    payload = {
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 0.25,
        "acceptance_histogram": [1, 2, 0, 0],
        "num_spec_steps": 3,
        "num_accepted_draft_tokens": 2,
        "num_draft_tokens": 9,
        "num_spec_tokens": 3,
    }

    class Metrics:  # like vLLM's RequestSpecDecodeMetrics
        def to_dict(self):
            return {**payload, "per_step_accepted": [1, 0, 1], "per_step_drafted": [3, 3, 3]}

    assert SpecSummary.from_vllm(None) is None
    assert SpecSummary.from_vllm(payload) == SpecSummary(3, 2, 9, 3)
    assert SpecSummary.from_vllm(Metrics()) == SpecSummary(3, 2, 9, 3, (1, 0, 1), (3, 3, 3))
