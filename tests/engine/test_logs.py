"""Engine logs (harness/engine/logs.py): a failed start names the checkpoint its log blames."""

from __future__ import annotations


def test_engine_start_failure_names_the_checkpoint_its_log_blames(tmp_path):
    from harness.engine.logs import failing_checkpoint

    log = tmp_path / "engine.log"
    log.write_text(
        "$ python -m vllm... --model /m/verifier --speculative-config {draft: /m/draft}\n"
        "INFO loading /m/verifier/model-00001.safetensors\n"
        "ERROR: /m/draft/model.safetensors: incomplete metadata, file not fully covered\n"
        "Traceback ...\n"
    )
    assert failing_checkpoint(log, "/m/verifier", "/m/draft") == "the draft /m/draft"
    log.write_text("$ cmd /m/verifier /m/draft\nERROR /m/verifier/config.json: bad vocab\n")
    assert failing_checkpoint(log, "/m/verifier", "/m/draft") == "the verifier /m/verifier"
    log.write_text("$ cmd /m/verifier /m/draft\nsegfault\n")
    assert failing_checkpoint(log, "/m/verifier", "/m/draft") == "verifier /m/verifier with draft /m/draft"
