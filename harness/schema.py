"""The result schema: the one module that names a run folder's files, a result row's columns,
a manifest's fields and a baseline's, and reads each back as the type it was written from.

Writers (harness/bench/) build `CellRow`s and write `to_dict()`; readers (harness/results/, the main
job) get `CellRow.from_dict`, `Manifest.from_dict` and `BaselineFile.from_dict` and use
attributes, so a renamed column fails the type checker, not a user's run. Run folders written
by older versions load: a missing column reads as None (or an empty list); an unknown one is
dropped. Column groups and definitions: harness/results/table.py's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Self

# ----------------------------------------------------------------------------- names on disk

MANIFEST_FILE = "manifest.json"
TABLE_FILE = "results.parquet"
CSV_FILE = "results.csv"
DERIVED_FILE = "derived.json"  # sha256 of the tables and of the cells they were built from
CELLS_DIR = "cells"
REQUESTS_DIR = "requests"  # under CELLS_DIR: per-request records by arm
BASELINE_FILE = "baseline.json"
BASELINE_FORMAT = 1
DYNAMIC_SUFFIX = "-dynamic"  # harness/bench/dynamic.py labels a draft's k-schedule arm so

BASELINE, SPECULATIVE = "baseline", "speculative"  # a row's `mode`

# What identifies a measured setting across runs (the draft label may differ between runs).
SETTING = ("suite", "k", "concurrency", "temperature", "request_rate")
Setting = tuple[str, int, int, float, float]
# Cells that differ in any of these measured different things: never aligned by accident.
COMPARABILITY = ("verifier_hash", "max_tokens", "suite_version", "suite_sha")
# A row's breakdowns: the bucket names' column per breakdown (harness/bench/breakdown.py)
BUCKET_NAMES = {
    "output_position": "output_position_buckets",
    "prompt_length": "prompt_length_buckets",
    "segment": "segments",
    "turn": "turns",
    "k": "k_sweep",
}
Bucket = tuple[str, float, float | None, float | None, int | None]


def _list(value: Any) -> list:
    """A list column as a list: a list (cells/*.json), an array (results.parquet), or absent
    (None, or NaN where pandas filled a missing column)."""
    return [] if value is None or isinstance(value, float) else list(value)


def clean_value(value: Any) -> Any:
    """pandas turns None into NaN in numeric columns and lists into arrays; a row wants None and
    lists back."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, list | tuple | dict | str):
        return clean_value(value.item())  # numpy scalar
    if hasattr(value, "tolist"):
        return value.tolist()  # numpy array from parquet list columns
    return value


def _known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in data:
            out[f.name] = _list(data[f.name]) if str(f.type).startswith("list") else data[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            out[f.name] = [] if str(f.type).startswith("list") else None  # written by an older version
    return out


@dataclass(frozen=True)
class Derived:
    """derived.json: the sha256 of the cells the tables were built from, and of each table."""

    cells_sha256: str | None
    files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = _known_fields(cls, data)
        return cls(known.get("cells_sha256"), dict(known.get("files") or {}))


# ----------------------------------------------------------------------------- result rows


@dataclass
class CellIdentity:
    """The columns that say which cell a row belongs to and what it is comparable with."""

    run_id: str
    cell_id: str
    draft: str
    method: str
    suite: str
    suite_version: str
    suite_sha: str
    k: int
    concurrency: int
    temperature: float
    top_p: float
    max_tokens: int
    repeats: int
    engine: str
    rejection_sample_method: str
    verifier_hash: str
    draft_hash: str | None
    # Offered requests/s with Poisson/gamma arrivals (bench.request_rate); 0: closed loop, every
    # request sent at once under the concurrency limit (what rows of older versions measured).
    request_rate: float = field(default=0.0, kw_only=True)


@dataclass
class CellRow(CellIdentity):
    """One row of the result table: a cell's identity (the inherited columns, first) and one arm's
    counters and derived metrics. Written by harness/bench/rows.py, read back by `from_dict`."""

    mode: str
    num_requests: int
    num_failed: int
    num_output_tokens: int
    wall_s: float
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: list[int]
    acceptance_length: float | None
    draft_acceptance_rate: float | None
    per_position_rates: list[float]
    al_ci_low: float | None
    al_ci_high: float | None
    per_request_al_mean: float | None
    output_tok_per_s: float | None
    output_tok_per_s_repeats: list[float]
    ttft_ms_median: float | None
    ttft_ms_p99: float | None
    tpot_ms_median: float | None
    tpot_ms_p99: float | None
    itl_ms_median: float | None
    itl_ms_p99: float | None
    itl_per_token_ms_median: float | None
    itl_per_token_ms_p99: float | None
    status: str
    error: str | None
    speedup: float | None = None
    lossless_matches: int | None = None
    lossless_compared: int | None = None
    lossless_match_rate: float | None = None
    predicted_acceptance_length: float | None = None
    al_gap: float | None = None
    num_verify_steps: int | None = None
    tokens_per_step: float | None = None
    # open-loop load (harness/analysis/slo.py): p90s beside the median and p99 above, e2e latency,
    # (open-loop cells) sends/s as realised and finished requests/s, with bench.slo the requests/s that met it
    # and their share
    ttft_ms_p90: float | None = None
    tpot_ms_p90: float | None = None
    itl_per_token_ms_p90: float | None = None
    e2e_ms_median: float | None = None
    e2e_ms_p90: float | None = None
    e2e_ms_p99: float | None = None
    arrival_rate: float | None = None
    achieved_rate: float | None = None
    goodput: float | None = None
    slo_attainment: float | None = None
    # vLLM's prefix cache over the arm (vllm:prefix_cache_hits / vllm:prefix_cache_queries: the share of
    # prompt tokens found cached), overall and per turn index; None: the engine reported no lookups
    prefix_cache_hit_rate: float | None = None
    prefix_cache_hit_rate_by_turn: list[float | None] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    # uncertainty and breakdowns (harness/bench/breakdown.py; definitions in harness/analysis/)
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    al_se: float | None = None
    num_prompts: int | None = None
    output_position_buckets: list[str] = field(default_factory=list)
    al_by_output_position: list[float | None] = field(default_factory=list)
    al_by_output_position_ci_low: list[float | None] = field(default_factory=list)
    al_by_output_position_ci_high: list[float | None] = field(default_factory=list)
    drafts_by_output_position: list[int] = field(default_factory=list)
    prompt_length_buckets: list[str] = field(default_factory=list)
    al_by_prompt_length: list[float | None] = field(default_factory=list)
    al_by_prompt_length_ci_low: list[float | None] = field(default_factory=list)
    al_by_prompt_length_ci_high: list[float | None] = field(default_factory=list)
    drafts_by_prompt_length: list[int] = field(default_factory=list)
    segments: list[str] = field(default_factory=list)
    al_by_segment: list[float | None] = field(default_factory=list)
    al_by_segment_ci_low: list[float | None] = field(default_factory=list)
    al_by_segment_ci_high: list[float | None] = field(default_factory=list)
    drafts_by_segment: list[int] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)  # multi-turn suites: "turn 1", "turn 2", ...
    al_by_turn: list[float | None] = field(default_factory=list)
    al_by_turn_ci_low: list[float | None] = field(default_factory=list)
    al_by_turn_ci_high: list[float | None] = field(default_factory=list)
    drafts_by_turn: list[int] = field(default_factory=list)
    speedup_by_turn: list[float | None] = field(default_factory=list)  # speculative tok/s over the baseline's, per turn
    k_sweep: list[str] = field(default_factory=list)  # bench.k_from_one_engine: "k=1" ... "k=<this cell's k>"
    al_by_k: list[float | None] = field(default_factory=list)
    al_by_k_ci_low: list[float | None] = field(default_factory=list)
    al_by_k_ci_high: list[float | None] = field(default_factory=list)
    drafts_by_k: list[int] = field(default_factory=list)
    repetition_share: float | None = None
    looping_requests: int | None = None
    max_prompt_tokens: int | None = None
    train_context_len: int | None = None
    baseline_cell: str | None = None  # the cell whose run measured this cell's baseline arm (bench.shared_baseline)
    k_schedule: str | None = None  # the dynamic arm's num_speculative_tokens_per_batch_size (JSON)
    # how the verifier's engines ran (bench.engine_schedule resolved): "side_by_side" (None in older rows)
    # or "one_at_a_time" (the speculative sentinels then timed on the speculative engine itself)
    engine_schedule: str | None = None
    # T = 0 misses, located and classified (harness/analysis/lossless.py): the worst verdict,
    # the earliest diverging output position, the engine noise measured, one record per miss (JSON)
    lossless_verdict: str | None = None
    lossless_first_position: int | None = None
    lossless_noise_nats: float | None = None
    lossless_divergences: str | None = None
    # T > 0: does the arm's sampled output follow the verifier's processed distribution at each of
    # its positions (harness/analysis/lossless_sampling.py; both arms: the baseline calibrates)
    sampling_p_value: float | None = None
    sampling_tv: float | None = None
    sampling_min_detectable_tv: float | None = None
    sampling_num_tokens: int | None = None
    # how the verifier's distributions were obtained (harness/engine/base.py RESCORE_*): "in-engine"
    # (processed in vLLM's worker), "raw top-N" (T = 1 without top-p), or "whole vocabulary" (every
    # position's V logprobs shipped and processed in the harness: a server at T != 1 or top-p < 1)
    sampling_rescore: str | None = None
    # the machine's speed around the cell's arms (harness/analysis/machine.py): the sentinel tok/s
    # bracketing the baseline arm and the speculative arm, their spread, and the steady noise
    machine_sentinels_baseline: list[float] = field(default_factory=list)
    machine_sentinels_speculative: list[float] = field(default_factory=list)
    machine_drift: float | None = None
    machine_noise: float | None = None
    machine_baseline_remeasured: bool | None = None  # the shared baseline arm, measured again beside this arm
    # the share of the machine's CPUs that processes outside the run used while the arms ran (the most seen)
    machine_foreign_cpu: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON edge: identity columns first, then this arm's columns."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A row as written (cells/*.json, results.parquet after `clean_value`). A column an older
        run did not write reads as None (an empty list for list columns); a column this version
        does not know is dropped."""
        return cls(**_known_fields(cls, data))

    @property
    def is_speculative(self) -> bool:
        return self.mode == SPECULATIVE

    @property
    def ok(self) -> bool:
        return (self.status or "ok") == "ok"

    @property
    def setting(self) -> Setting:
        return (self.suite, self.k, self.concurrency, self.temperature, float(self.request_rate or 0.0))

    def breakdown(self, what: str) -> list[Bucket]:
        """(bucket, AL, CI low, CI high, drafts) of one breakdown (`what`: a BUCKET_NAMES key),
        buckets without an AL left out."""
        names, al = _list(getattr(self, BUCKET_NAMES[what])), _list(getattr(self, f"al_by_{what}"))
        lo, hi = _list(getattr(self, f"al_by_{what}_ci_low")), _list(getattr(self, f"al_by_{what}_ci_high"))
        n = _list(getattr(self, f"drafts_by_{what}"))

        def at(xs: list, i: int):
            return xs[i] if i < len(xs) else None

        return [
            (str(name), float(v), at(lo, i), at(hi, i), at(n, i))
            for i, (name, v) in enumerate(zip(names, al, strict=False))
            if v is not None
        ]


def comparability_diffs(a: CellRow, b: CellRow) -> list[tuple[str, Any, Any]]:
    """(column, a's value, b's value) for each COMPARABILITY column where two cells differ."""
    return [(c, getattr(a, c), getattr(b, c)) for c in COMPARABILITY if getattr(a, c) != getattr(b, c)]


# ----------------------------------------------------------------------------- baseline.json

# The row columns a baseline cell keeps (with its floors): what the gate compares.
BASELINE_COLUMNS = (
    "draft",
    "method",
    "suite",
    "suite_version",
    "suite_sha",
    "k",
    "concurrency",
    "temperature",
    "request_rate",
    "max_tokens",
    "verifier_hash",
    "acceptance_length",
    "per_position_rates",
    "al_ci_low",
    "al_ci_high",
    "speedup",
    "al_se",
    "num_prompts",
    "segments",
    "al_by_segment",
    "sampling_p_value",
)


@dataclass
class BaselineCell(CellRow):
    """A cell of baseline.json: its row's BASELINE_COLUMNS, the per-position floors the gate holds
    it to, and its per-segment AL floors (thinking runs)."""

    per_position_floors: list[float] | None = None
    segment_floors: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        # a closed-loop cell (rate 0) is written as baselines were before open-loop cells existed
        out = {c: getattr(self, c) for c in BASELINE_COLUMNS if c != "request_rate" or self.request_rate}
        out["per_position_floors"] = self.per_position_floors
        if self.segment_floors is not None:
            out["segment_floors"] = self.segment_floors
        return out


@dataclass(frozen=True)
class BaselineCrossover:
    """A baseline's crossover concurrency of one (draft, suite, k, temperature) line
    (harness/results/gate_load.py)."""

    draft: str
    suite: str
    k: int
    temperature: float
    concurrencies: list[int]
    where: str
    crossover: float | None
    text: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**_known_fields(cls, data))


@dataclass
class BaselineFile:
    """baseline.json: the cells and crossovers a gate holds a run to, and the requirements stored
    with them (None: not stored, the gate's default applies)."""

    format: int | None
    source_run_id: str | None
    tolerance: float | None
    cells: list[BaselineCell]
    crossovers: list[BaselineCrossover] = field(default_factory=list)
    created_at: str | None = None
    max_crossover_drop: float | None = None
    lossless: str | None = None
    sampling_p_floor: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = _known_fields(cls, data)
        known["cells"] = [BaselineCell.from_dict(c) for c in known.get("cells") or [] if isinstance(c, Mapping)]
        crossovers = known.get("crossovers") or []
        known["crossovers"] = [BaselineCrossover.from_dict(c) for c in crossovers if isinstance(c, Mapping)]
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """The fields set (None: not stored), each cell as its BASELINE_COLUMNS and floors (no deep
        copy of the cells' other columns on the way)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "cells":
                value = [c.to_dict() for c in self.cells]
            elif f.name == "crossovers":
                value = [asdict(c) for c in self.crossovers]
            if value is not None:
                out[f.name] = value
        return out


# ----------------------------------------------------------------------------- manifest.json

RUNNING, INTERRUPTED = "running", "interrupted"


@dataclass(frozen=True)
class Owner:
    """The harness process that runs a run (harness/results/manifest.py: a dead owner's `running`
    run reads as interrupted)."""

    pid: int | None
    pid_start_ticks: int | None
    hostname: str | None


@dataclass(frozen=True)
class Manifest:
    """manifest.json as the results layer reads it. `data` keeps the whole file as written (a
    baseline copies it); provenance, recipe, verifier and drafts are recorded free-form by
    harness/bench/manifest.py, and the few facts read from them are properties here."""

    data: dict[str, Any]
    run_id: str | None
    status: str
    planned_cells: list[str]
    started_at: str | None = None
    ended_at: str | None = None
    owner: Owner | None = None
    recorded_status: str | None = None  # what the file says, when the effective status differs
    status_note: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        d = dict(data)
        owner = d.get("owner")
        return cls(
            data=d,
            run_id=d.get("run_id"),
            status=str(d.get("status", "unknown")),
            planned_cells=list(d.get("planned_cells") or []),
            started_at=d.get("started_at"),
            ended_at=d.get("ended_at"),
            owner=Owner(owner.get("pid"), owner.get("pid_start_ticks"), owner.get("hostname"))
            if isinstance(owner, Mapping)
            else None,
            recorded_status=d.get("recorded_status"),
            status_note=d.get("status_note"),
        )

    def with_status(self, status: str, note: str) -> Manifest:
        """The effective status, with what the file says kept beside it."""
        data = {**self.data, "status": status, "recorded_status": self.status, "status_note": note}
        return Manifest.from_dict(data)

    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.data.get("provenance") or {})

    @property
    def git_sha(self) -> str | None:
        return self.provenance.get("git_sha")

    @property
    def hardware(self) -> Hardware:
        hw = self.provenance.get("hardware") or {}
        return Hardware(hw.get("device"), hw.get("gpu"), hw.get("cpu"), hw.get("platform"))

    @property
    def packages(self) -> dict[str, str]:
        return dict(self.provenance.get("packages") or {})

    @property
    def verifiers(self) -> list[Artifact]:
        """The verifier records (path, content hash): one, or one per verifier path."""
        ver = self.data.get("verifier") or {}
        entries = list(ver.values()) if ver and all(isinstance(v, dict) for v in ver.values()) else [ver]
        return [Artifact.from_dict(v) for v in entries if v]

    @property
    def verifier_paths(self) -> list[str]:
        ver = self.data.get("verifier") or {}
        return [str(p) for p in ver] if ver and all(isinstance(v, dict) for v in ver.values()) else []

    @property
    def drafts(self) -> dict[str, Artifact]:
        return {str(k): Artifact.from_dict(v) for k, v in (self.data.get("drafts") or {}).items()}

    @property
    def suite_sources(self) -> dict[str, str]:
        """Suite name -> where its prompts came from (a built-in name or a file path)."""
        return {str(k): str((v or {}).get("source", "")) for k, v in (self.data.get("suites") or {}).items()}

    @property
    def recipe_verifier_path(self) -> str | None:
        return self._recipe_verifier().get("path")

    @property
    def standin(self) -> str | None:
        """The built-in stand-in the run's recipe named (None: a real checkpoint)."""
        return self._recipe_verifier().get("standin")

    @property
    def slo(self) -> dict[str, Any] | None:
        """The run's bench.slo ({ttft_ms, tpot_ms, e2e_ms}), None when it stated none."""
        slo = ((self.data.get("recipe") or {}).get("bench") or {}).get("slo")
        return dict(slo) if slo else None

    def _recipe_verifier(self) -> dict[str, Any]:
        return dict((self.data.get("recipe") or {}).get("verifier") or {})


@dataclass(frozen=True)
class Hardware:
    device: str | None
    gpu: str | None
    cpu: str | None
    platform: str | None

    def describe(self) -> str:
        return f"{self.device or '?'} — {self.gpu or self.cpu or self.platform or '?'}"


@dataclass(frozen=True)
class Artifact:
    """A verifier's or draft's record in the manifest: where it was and its content hash."""

    path: str | None
    content_hash: str | None  # the sha256 (older manifests stored {"sha256": ...})
    method: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> Artifact:
        d = data if isinstance(data, Mapping) else {}
        h = d.get("content_hash")
        return cls(d.get("path"), h.get("sha256") if isinstance(h, Mapping) else h, d.get("method"))
