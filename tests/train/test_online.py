"""Online training's own pieces (harness/train/online.py), without an engine: the sample tables
split exactly like the offline shards, speculators' ArrowDataset reads them, the disk bound is
the stated formula, and the recipe refuses online states without a vLLM source."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.recipe import load_recipe
from harness.train.fit import split_indices
from harness.train.hidden_states import Sample, extract_to_shards
from harness.train.online import DirPeak, cache_bound_bytes, write_sample_tables
from tests.conftest import PLAIN_RECIPE


def _samples(n: int) -> list[Sample]:
    return [Sample(f"s{i}", tuple(range(1, 5 + i % 3)), tuple(range(7, 9 + i % 4))) for i in range(n)]


def test_online_tables_hold_the_offline_shards_split(tmp_path):
    import torch

    samples = _samples(23)
    rows = write_sample_tables(samples, tmp_path / "online", validation_fraction=0.2)
    assert rows == {"train": 19, "val": 4}

    def states(batch):
        return [{"aux": torch.zeros(len(s.input_ids), 2, 4), "last": torch.zeros(len(s.input_ids), 4)} for s in batch]

    shards = extract_to_shards(states, samples, tmp_path / "hidden", shard_size=5, max_batch_tokens=None)
    train_idx, val_idx = split_indices(shards, 0.2)
    recs = [r for p in shards for r in torch.load(p)]
    offline = {
        "train": [recs[s * 5 + i]["input_ids"].tolist() for s, i in train_idx],
        "val": [recs[s * 5 + i]["input_ids"].tolist() for s, i in val_idx],
    }
    from datasets import load_from_disk

    for split in ("train", "val"):
        ds = load_from_disk(str(tmp_path / "online" / split))
        assert [r.tolist() for r in ds["input_ids"]] == offline[split]
        first = ds[0]  # torch format, as speculators' ArrowDataset indexes it
        assert first["loss_mask"].dtype == torch.bool and int(first["seq_len"]) == len(first["input_ids"])


def test_arrow_dataset_reads_the_tables_and_generates_on_a_miss(tmp_path):
    """speculators' own ArrowDataset over the harness's table: lengths from `seq_len`, and a
    missing sample goes to the extraction server (here: none listening, so it raises)."""
    from hs_connectors import FileTransfer
    from speculators.train.data import ArrowDataset

    samples = _samples(6)
    write_sample_tables(samples, tmp_path / "online", validation_fraction=0.5)
    ds = ArrowDataset(
        max_len=64,
        datapath=str(tmp_path / "online" / "train"),
        transfer=FileTransfer(tmp_path / "cache"),
        vllm_endpoint="http://127.0.0.1:9/v1",
        on_missing="raise",
    )
    assert ds.approx_lengths == [len(s.input_ids) for j, s in enumerate(samples) if j % 2 == 0]
    with pytest.raises(RuntimeError, match="Failed to load hidden states for sample 0"):
        ds[0]


def test_cache_bound_is_in_flight_plus_one_samples_of_the_longest_context():
    # Kimi-K2.5 on 8 ranks: 8 samples in flight (one per rank) + 1, 8192 tokens, 4 states of 7168 bf16
    assert cache_bound_bytes(8192, 4, 7168, in_flight=8, bytes_per=2) == 9 * 8192 * 4 * 7168 * 2


@pytest.mark.parametrize(("workers", "in_flight"), [(0, 2), (3, 6)])
def test_disk_bound_counts_one_sample_per_loader_worker_of_every_rank(workers, in_flight):
    """Online loader workers each hold one sample's file while the trainer works (2 ranks here)."""
    from types import SimpleNamespace

    from harness.train.online import disk_bound

    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "train.hidden_states_mode='online'",
            "train.hidden_states_source='vllm'",
            "train.launcher='torchrun'",
            "train.nproc_per_node=2",
            f"train.online_loader_workers={workers}",
            "engine.max_model_len=512",
        ],
    )
    layout, extraction = SimpleNamespace(hidden_size=64), SimpleNamespace(engine_kwargs={"dtype": "bfloat16"})
    bound, formula = disk_bound(recipe, layout, [1, 2, 3], extraction)  # type: ignore[arg-type]
    assert bound == cache_bound_bytes(512, 4, 64, in_flight=in_flight, bytes_per=2)
    assert formula.startswith(f"({in_flight} samples in flight")


def test_a_killed_runs_cache_files_are_removed_before_the_server_starts(tmp_path):
    from harness.train.online import clear_cache

    cache = tmp_path / "hidden_raw"
    cache.mkdir()
    for name in ("cmpl-1-0-a.safetensors", "cmpl-1-0-a.safetensors.lock"):
        (cache / name).write_bytes(b"x")
    assert clear_cache(cache) == ["cmpl-1-0-a.safetensors", "cmpl-1-0-a.safetensors.lock"]
    assert list(cache.iterdir()) == [] and clear_cache(tmp_path / "none") == []


def test_dir_peak_sees_the_largest_size(tmp_path):
    import time

    with DirPeak(tmp_path, interval_s=0.01) as peak:
        (tmp_path / "a").write_bytes(b"x" * 1000)
        time.sleep(0.1)
        (tmp_path / "a").unlink()
        time.sleep(0.05)
    assert peak.peak == 1000 and peak.samples > 3


def test_online_states_need_a_vllm_source():
    with pytest.raises(BadInput, match="hidden_states_mode 'online' streams states from a vLLM extraction server"):
        load_recipe(PLAIN_RECIPE, ["train.hidden_states_mode='online'"])
    load_recipe(PLAIN_RECIPE, ["train.hidden_states_mode='online'", "train.hidden_states_source='vllm'"])


def test_a_half_written_checkpoint_is_dropped_before_resuming(tmp_path):
    """A save killed mid-way (seen: an FSDP save that failed after config.json) leaves an epoch
    folder speculators would resume from and fail to load; the pipeline removes it first."""
    from harness.train.training import CHECKPOINT_DONE, drop_incomplete_checkpoints

    ck = tmp_path / "checkpoints"
    for epoch, files in {"0": ["model.safetensors", CHECKPOINT_DONE], "1": ["config.json"]}.items():
        (ck / epoch).mkdir(parents=True)
        for f in files:
            (ck / epoch / f).write_text("x")
    assert drop_incomplete_checkpoints(ck) == ["1"]
    assert sorted(p.name for p in ck.iterdir()) == ["0"]
    assert drop_incomplete_checkpoints(tmp_path / "none") == []


def test_a_run_folder_from_before_a_setting_was_added_resumes(tmp_path):
    """A run folder recorded by an older harness (without train.hidden_states_mode) is the same
    recipe once the new setting's default is filled in; a real difference is still refused."""
    import json

    from harness.train.run_dir import TRAIN_SECTIONS, prepare_run_dir

    recipe = load_recipe(PLAIN_RECIPE)
    run = tmp_path / "run"
    prepare_run_dir(run, recipe, TRAIN_SECTIONS)
    marker = json.loads((run / "recipe.json").read_text())
    del marker["recipe"]["train"]["hidden_states_mode"]  # as an older version wrote it
    marker["fingerprint"] = "older-version"
    (run / "recipe.json").write_text(json.dumps(marker))
    prepare_run_dir(run, recipe, TRAIN_SECTIONS)  # resumes
    assert json.loads((run / "recipe.json").read_text())["fingerprint"] == recipe.fingerprint(*TRAIN_SECTIONS)
    with pytest.raises(BadInput, match="was made by a different recipe \\(differs in train.epochs\\)"):
        prepare_run_dir(run, load_recipe(PLAIN_RECIPE, ["train.epochs=9"]), TRAIN_SECTIONS)


def test_online_states_are_rounded_as_the_offline_shards_store_them():
    import torch

    from harness.train.online import AsStored

    class Fake:  # speculators' ArrowDataset, as the Trainer's loader sees it
        approx_lengths, hidden_states_dtype = [3, 2], torch.float32

        def __len__(self):
            return 2

        def __getitem__(self, i):
            if i == 1:
                return "unavailable"  # speculators' SampleUnavailable passes through
            x = torch.tensor([[1.0 + 2**-12]])  # not representable in bf16
            return {"hidden_states": x, "verifier_last_hidden_states": x.clone(), "input_ids": torch.tensor([1])}

    ds = AsStored(Fake(), "bfloat16")
    item = ds[0]
    assert item["hidden_states"].dtype == torch.bfloat16 and item["hidden_states"].item() == 1.0
    assert item["verifier_last_hidden_states"].dtype == torch.bfloat16 and item["input_ids"].dtype == torch.long
    assert ds[1] == "unavailable" and len(ds) == 2 and ds.approx_lengths == [3, 2]
