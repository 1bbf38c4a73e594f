"""The result schema's run folder and rows: the names of a run folder's files and a result row's
columns, read back as the type they were written from. The rest of the result schema, by file:
manifest.json in harness/schema_manifest.py, baseline.json in harness/schema_baseline.py, a cell's
per-request side file in harness/schema_requests.py.

Results are pydantic models, like the recipe. Writers (harness/bench/) build `CellRow`s and write
them as a `CellFile` (cells/<cell>.json: `{"format": CELL_FORMAT, "rows": [...]}`); readers
(harness/results/, the main job) get them back with one `model_validate_json` per file and use
attributes, so a renamed column fails the type checker, not a user's run. A row's breakdowns (AL by
output position, prompt length, segment, turn and k) are typed sub-models (`Breakdowns`, one
`Breakdown` of `Bucket`s each), not parallel lists.

Formats of a cell file: 2 (this one) and 1 (before it: a bare list of flat rows, every breakdown as
parallel lists, `al_by_segment`, `segments`, ...). A format-1 file is read by one converter,
`CellRow.from_dict` (absent columns read None, or an empty list for list columns; unknown ones are
dropped); a format this version does not know is refused in one line (harness/results/table.py).
The pandas tables users load (results.parquet / results.csv) keep the flat columns:
`CellRow.to_dict()` makes them, in one place (`Breakdowns.flat`). docs/cell.schema.json is
`CellFile.model_json_schema()` (tests/test_schema.py keeps it current; `python -m harness.schema`
prints it). Column groups and definitions: harness/results/table.py's docstring.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, RootModel

# ----------------------------------------------------------------------------- names on disk

MANIFEST_FILE = "manifest.json"
TABLE_FILE = "results.parquet"
CSV_FILE = "results.csv"
DERIVED_FILE = "derived.json"  # sha256 of the tables and of the cells they were built from
CELLS_DIR = "cells"
REQUESTS_DIR = "requests"  # under CELLS_DIR: per-request records by arm
CELL_FORMAT: Final = 2  # cells/<cell>.json; 1: a bare list of flat rows (read by CellRow.from_dict)
DYNAMIC_SUFFIX = "-dynamic"  # harness/bench/dynamic.py labels a draft's k-schedule arm so

BASELINE, SPECULATIVE = "baseline", "speculative"  # a row's `mode`

# What identifies a measured setting across runs (the draft label may differ between runs).
SETTING = ("suite", "k", "concurrency", "temperature", "request_rate")
Setting = tuple[str, int, int, float, float]
# Cells that differ in any of these measured different things: never aligned by accident.
COMPARABILITY = ("verifier_hash", "max_tokens", "suite_version", "suite_sha")


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list


def lenient_model(cls: type[BaseModel], data: dict[str, Any]) -> Any:
    """A model from a dict of flat columns as an older version (or a test) wrote it: a list column
    given as None reads []; when a column without a default is absent, the model is built without
    validation, the absent column None ([] for a list): what the dataclass rows read before."""
    absent = False
    for name, f in cls.model_fields.items():
        if name in data:
            if data[name] is None and _is_list(f.annotation):
                data[name] = []
        elif f.is_required():
            data[name], absent = ([] if _is_list(f.annotation) else None), True
    return cls.model_construct(**data) if absent else cls.model_validate(data)


class Derived(BaseModel):
    """derived.json: the sha256 of the cells the tables were built from, and of each table."""

    cells_sha256: str | None = None
    files: dict[str, str] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(cells_sha256=data.get("cells_sha256"), files=dict(data.get("files") or {}))


# ----------------------------------------------------------------------------- breakdowns


class Bucket(BaseModel):
    """One bucket of a breakdown: its label, the AL of its drafts with the AL's CI, and the drafts."""

    model_config = ConfigDict(frozen=True)

    label: str
    al: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    drafts: int | None = None


class Measured(NamedTuple):
    """A bucket with an AL (`Breakdown.measured`)."""

    label: str
    al: float
    ci_low: float | None
    ci_high: float | None
    drafts: int | None


class Breakdown(RootModel[list[Bucket]]):
    """One breakdown of a row's AL: its buckets in order (empty: not measured)."""

    root: list[Bucket] = Field(default_factory=list)

    @property
    def buckets(self) -> list[Bucket]:
        return self.root

    @property
    def labels(self) -> list[str]:
        return [b.label for b in self.root]

    @property
    def als(self) -> list[float | None]:
        return [b.al for b in self.root]

    @property
    def drafts(self) -> list[int | None]:
        return [b.drafts for b in self.root]

    def measured(self) -> list[Measured]:
        """The buckets with an AL, in order."""
        return [Measured(b.label, b.al, b.ci_low, b.ci_high, b.drafts) for b in self.root if b.al is not None]

    def __len__(self) -> int:
        return len(self.root)

    def __bool__(self) -> bool:
        return bool(self.root)


BreakdownName = Literal["output_position", "prompt_length", "segment", "turn", "k"]
BREAKDOWNS: tuple[BreakdownName, ...] = ("output_position", "prompt_length", "segment", "turn", "k")
# The flat columns of a breakdown in the tables (and in format-1 cells): its labels' column, then
# al_by_<what>, al_by_<what>_ci_low, al_by_<what>_ci_high, drafts_by_<what>
LABEL_COLUMNS: dict[BreakdownName, str] = {
    "output_position": "output_position_buckets",
    "prompt_length": "prompt_length_buckets",
    "segment": "segments",
    "turn": "turns",  # multi-turn suites: "turn 1", "turn 2", ...
    "k": "k_sweep",  # bench.k_from_one_engine: "k=1" ... "k=<this cell's k>"
}


def flat_columns(what: BreakdownName) -> tuple[str, str, str, str, str]:
    """(labels, al, CI low, CI high, drafts): a breakdown's columns in the tables."""
    return (LABEL_COLUMNS[what], f"al_by_{what}", f"al_by_{what}_ci_low", f"al_by_{what}_ci_high", f"drafts_by_{what}")


class Breakdowns(BaseModel):
    """A row's AL broken down (harness/bench/breakdown.py; definitions in harness/analysis/):
    by output position, by prompt length, by thinking/answer segment, by conversation turn, and
    (bench.k_from_one_engine) at every k' <= k from this cell's engine."""

    output_position: Breakdown = Field(default_factory=Breakdown)
    prompt_length: Breakdown = Field(default_factory=Breakdown)
    segment: Breakdown = Field(default_factory=Breakdown)
    turn: Breakdown = Field(default_factory=Breakdown)
    k: Breakdown = Field(default_factory=Breakdown)

    def of(self, what: BreakdownName) -> Breakdown:
        return {
            "output_position": self.output_position,
            "prompt_length": self.prompt_length,
            "segment": self.segment,
            "turn": self.turn,
            "k": self.k,
        }[what]

    def flat(self, only: tuple[BreakdownName, ...] = BREAKDOWNS) -> dict[str, list]:
        """The flat columns of the tables (and of format-1 cells), in their order: the one place
        breakdowns become parallel lists."""
        out: dict[str, list] = {}
        for what in only:
            buckets = self.of(what).root
            labels, al, lo, hi, drafts = flat_columns(what)
            out[labels] = [b.label for b in buckets]
            out[al] = [b.al for b in buckets]
            out[lo] = [b.ci_low for b in buckets]
            out[hi] = [b.ci_high for b in buckets]
            out[drafts] = [b.drafts for b in buckets]
        return out

    @classmethod
    def from_flat(cls, data: Mapping[str, Any], only: tuple[BreakdownName, ...] = BREAKDOWNS) -> Breakdowns:
        """The converter from the flat columns (format-1 cells, baseline.json): bucket i of a
        breakdown is entry i of each of its lists (None where a list is shorter)."""

        def column(name: str) -> list:
            value = data.get(name)
            return [] if value is None else list(value)

        def at(xs: list, i: int) -> Any:
            return xs[i] if i < len(xs) else None

        parts: dict[str, Breakdown] = {}
        for what in only:
            labels, al, lo, hi, drafts = (column(c) for c in flat_columns(what))
            parts[what] = Breakdown(
                [
                    Bucket(label=str(name), al=at(al, i), ci_low=at(lo, i), ci_high=at(hi, i), drafts=at(drafts, i))
                    for i, name in enumerate(labels)
                ]
            )
        return cls(**parts)


# ----------------------------------------------------------------------------- result rows


class CellIdentity(BaseModel):
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
    request_rate: float = 0.0


class CellRow(CellIdentity):
    """One row of the result table: a cell's identity (the inherited columns, first) and one arm's
    counters and derived metrics. Written by harness/bench/rows.py; read back from a cell file in
    one validation (harness/results/table.py), or from flat columns by `from_dict`."""

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
    prefix_cache_hit_rate_by_turn: list[float | None] = []
    flags: list[str] = []
    # uncertainty and breakdowns (harness/bench/breakdown.py; definitions in harness/analysis/)
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    # the CI widened by this machine's between-run SD of ln speedup (harness/bench/machine_record.py):
    # tau, and what the record rests on; None: the CI is this run's own (its requests and repeats)
    speedup_between_run_sd: float | None = None
    speedup_between_run_source: str | None = None
    al_se: float | None = None
    num_prompts: int | None = None
    breakdowns: Breakdowns = Field(default_factory=Breakdowns)
    speedup_by_turn: list[float | None] = []  # speculative tok/s over the baseline's, per turn
    repetition_share: float | None = None
    looping_requests: int | None = None
    max_prompt_tokens: int | None = None
    train_context_len: int | None = None
    baseline_cell: str | None = None  # the cell whose run measured this cell's baseline arm (bench.shared_baseline)
    k_schedule: str | None = None  # the dynamic arm's num_speculative_tokens_per_batch_size (JSON)
    # how the verifier's engines ran (bench.engine_schedule resolved): "side_by_side" (None in older rows)
    # or "one_at_a_time" (the speculative sentinels then timed on the speculative engine itself)
    engine_schedule: str | None = None
    # a sequential paired cell (gate.max_prompts, harness/bench/sequential.py): the prompts it could draw,
    # the paired requests they make (the looks' information is a share of them), the paired requests at
    # each look (the gate's boundary is the last look's), and why its rounds stopped ("pass" / "fail":
    # the verdict settled; "budget": all prompts drawn); None: the fixed design
    prompts_budget: int | None = None
    sequential_planned: int | None = None
    sequential_looks: list[int] | None = None
    sequential_stop: str | None = None
    # a raced answer table (bench.race, harness/bench/race.py): the looks its budget allowed (each look's
    # intervals at 1 - 0.05/looks) and how this arm left the race ("out": its rank settled; "settled": racing
    # when one candidate was left; "budget": every prompt drawn); None: not raced
    race_looks: int | None = None
    race_exit: str | None = None
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
    machine_sentinels_baseline: list[float] = []
    machine_sentinels_speculative: list[float] = []
    machine_drift: float | None = None
    machine_noise: float | None = None
    machine_baseline_remeasured: bool | None = None  # the shared baseline arm, measured again beside this arm
    # the share of the machine's CPUs that processes outside the run used while the arms ran (the most seen)
    machine_foreign_cpu: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The flat columns of the tables (results.parquet / results.csv; compare's `--by`),
        identity columns first, each breakdown as its parallel lists (`Breakdowns.flat`) where
        they always stood (speedup_by_turn after the turn columns)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name == "breakdowns":
                for column, values in self.breakdowns.flat().items():
                    out[column] = values
                    if column == "drafts_by_turn":
                        out["speedup_by_turn"] = list(self.speedup_by_turn)
            elif name != "speedup_by_turn":
                value = getattr(self, name)
                out[name] = list(value) if isinstance(value, list) else value
        return out

    @classmethod
    def flat_columns(cls) -> list[str]:
        """The tables' columns, in order."""
        return list(_EMPTY_ROW.to_dict())

    @classmethod
    def flat_list_columns(cls) -> list[str]:
        """The tables' list columns (JSON in results.csv)."""
        return [c for c, v in _EMPTY_ROW.to_dict().items() if isinstance(v, list)]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The converter from flat columns: a row of a format-1 cell file (or a test's dict). A column
        an older run did not write reads as None (an empty list for list columns); a column this
        version does not know is dropped; the breakdowns' parallel lists become `Breakdowns`."""
        d = dict(data)
        if not isinstance(d.get("breakdowns"), Breakdowns | Mapping):
            d["breakdowns"] = Breakdowns.from_flat(data)
        elif isinstance(d["breakdowns"], Mapping):
            d["breakdowns"] = Breakdowns.model_validate(d["breakdowns"])
        return lenient_model(cls, d)

    @property
    def is_speculative(self) -> bool:
        return self.mode == SPECULATIVE

    @property
    def ok(self) -> bool:
        return (self.status or "ok") == "ok"

    @property
    def setting(self) -> Setting:
        return (self.suite, self.k, self.concurrency, self.temperature, float(self.request_rate or 0.0))


class CellFile(BaseModel):
    """cells/<cell>.json: the rows of one finished cell (its baseline and speculative arm), with the
    format they were written in. The JSON schema of this model is docs/cell.schema.json."""

    model_config = ConfigDict(title="harness cell file")

    format: Literal[2] = CELL_FORMAT
    rows: list[CellRow]


def cell_json_schema() -> str:
    """docs/cell.schema.json's text."""
    return json.dumps(CellFile.model_json_schema(), indent=2) + "\n"


class GatedCell(Protocol):
    """What the gate reads of a cell: a run's (CellRow) or a baseline's (BaselineCell)."""

    @property
    def draft(self) -> str: ...
    @property
    def suite(self) -> str: ...
    @property
    def suite_version(self) -> str: ...
    @property
    def suite_sha(self) -> str: ...
    @property
    def k(self) -> int: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def temperature(self) -> float: ...
    @property
    def request_rate(self) -> float: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def verifier_hash(self) -> str: ...
    @property
    def acceptance_length(self) -> float | None: ...
    @property
    def per_position_rates(self) -> list[float]: ...
    @property
    def al_ci_low(self) -> float | None: ...
    @property
    def al_ci_high(self) -> float | None: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def al_se(self) -> float | None: ...
    @property
    def num_prompts(self) -> int | None: ...
    @property
    def breakdowns(self) -> Breakdowns: ...
    @property
    def sampling_p_value(self) -> float | None: ...
    @property
    def setting(self) -> Setting: ...


def comparability_diffs(a: GatedCell, b: GatedCell) -> list[tuple[str, Any, Any]]:
    """(column, a's value, b's value) for each COMPARABILITY column where two cells differ."""
    return [(c, getattr(a, c), getattr(b, c)) for c in COMPARABILITY if getattr(a, c) != getattr(b, c)]


_EMPTY_ROW: CellRow = lenient_model(CellRow, {})  # every column at its empty value: the tables' column list


if __name__ == "__main__":  # docs/cell.schema.json
    print(cell_json_schema(), end="")
