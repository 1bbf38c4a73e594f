"""Where every tensor of a checkpoint lives, read from the index and safetensors headers only.

No weight bytes are read: a safetensors file starts with an 8-byte little-endian header length
and a JSON header (dtype, shape, offsets per tensor); that is all this module opens.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.jsonfiles import read_json_file

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
# A header larger than this is not a header (the real Kimi-K2.5 shards have ~0.5 MB ones).
_MAX_HEADER_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class WeightMap:
    """key -> shard file name, plus which shard files are actually on disk."""

    weight_map: dict[str, str]
    shards: tuple[str, ...]
    present: frozenset[str]
    index_file: str | None

    @property
    def structure_only(self) -> bool:
        """An index without any of its shards: enough to plan, not to load."""
        return self.index_file is not None and not self.present


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Parse one safetensors header; a clear error for anything that is not one."""
    fix = "re-download or re-save this file"
    try:
        with path.open("rb") as f:
            raw_len = f.read(8)
            if len(raw_len) < 8:
                raise BadInput(f"{path}: corrupt safetensors header (file is {len(raw_len)} bytes); {fix}")
            (n,) = struct.unpack("<Q", raw_len)
            size = path.stat().st_size
            if n == 0 or n > _MAX_HEADER_BYTES or n > size - 8:
                raise BadInput(
                    f"{path}: corrupt safetensors header (declares {n} header bytes in a {size}-byte file); {fix}"
                )
            blob = f.read(n)
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({e.strerror}); check the file and its permissions") from e
    try:
        header = json.loads(blob)
        if not isinstance(header, dict):
            raise ValueError("header is not a JSON object")
        out, spans = {}, []
        for key, meta in header.items():
            if key == "__metadata__":
                continue
            out[key] = TensorInfo(dtype=str(meta["dtype"]), shape=tuple(int(x) for x in meta["shape"]))
            begin, end = (int(x) for x in meta["data_offsets"])
            spans.append((begin, end, key))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: corrupt safetensors header ({e}); {fix}") from e
    problem = coverage_problem(spans, out, size - 8 - n)
    if problem:
        raise BadInput(f"{path}: corrupt or truncated safetensors file ({problem}); {fix}")
    return out


# Bytes per element of safetensors dtypes (sub-byte and unknown dtypes are checked for
# contiguity only).
_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


def coverage_problem(spans: list[tuple[int, int, str]], infos: dict[str, TensorInfo], data_len: int) -> str | None:
    """What the safetensors format forbids in a header's data offsets (the rule vLLM's loader
    enforces as "file not fully covered"): the tensors' byte ranges must tile the data section
    exactly, with no gap and no overlap, each as long as its dtype and shape say. Pure."""
    pos = 0
    for begin, end, key in sorted(spans):
        if begin != pos or end < begin:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap at byte {pos}"
            return f"tensor {key} at bytes {begin}..{end} {what}"
        width = _DTYPE_BYTES.get(infos[key].dtype)
        numel = 1
        for d in infos[key].shape:
            numel *= d
        if width is not None and end - begin != numel * width:
            info = infos[key]
            shape = list(info.shape)
            return f"tensor {key} spans {end - begin} bytes, its {info.dtype} shape {shape} needs {numel * width}"
        pos = end
    if pos != data_len:
        return f"the header covers {pos} data bytes but the file holds {data_len}" + (
            " (truncated)" if data_len < pos else ""
        )
    return None


def check_shards(folder: Path, wm: WeightMap) -> None:
    """Every present shard's header is sound (see `coverage_problem`) and holds every tensor the
    index places in it. Headers only: no weight bytes are read."""
    by_shard: dict[str, list[str]] = {}
    for key, shard in wm.weight_map.items():
        by_shard.setdefault(shard, []).append(key)
    for shard in sorted(wm.present):
        header = read_header(folder / shard)
        missing = [k for k in by_shard.get(shard, []) if k not in header]
        if missing:
            raise BadInput(
                f"{folder / shard}: the index places {missing[0]} here but the shard does not hold it"
                f"{f' (nor {len(missing) - 1} more)' if len(missing) > 1 else ''}; fix the index or "
                "re-download the shard"
            )


def check_checkpoint_files(folder: Path, what: str) -> None:
    """Before any engine sees `folder` (a `what`: "draft", ...): its JSON files parse and its
    safetensors are whole, so a broken file is named here, not in an engine's log."""
    if not (folder / "config.json").is_file():
        raise BadInput(f"{folder}: not a {what} checkpoint (no config.json)")
    for name in ("config.json", "harness.json", INDEX_NAME):
        if (folder / name).is_file():
            read_json_file(folder / name, f"fix or re-create the {what}'s {name}")
    check_shards(folder, read_weight_map(folder))


def read_weight_map(folder: Path) -> WeightMap:
    """Resolve key -> shard from the index, a single model.safetensors, or loose shards."""
    index = folder / INDEX_NAME
    if index.exists():
        try:
            data = json.loads(index.read_text())
            weight_map: dict[str, str] = dict(data["weight_map"])
        except (ValueError, KeyError, TypeError) as e:
            raise BadInput(
                f"{index}: malformed index ({e}); re-download it or delete it to use the shards' headers"
            ) from e
        shards = tuple(sorted(set(weight_map.values())))
        present = frozenset(s for s in shards if (folder / s).is_file())
        missing = [s for s in shards if s not in present]
        if present and missing:
            raise BadInput(
                f"{index}: names shard {missing[0]} which is missing from {folder}"
                f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}; "
                "finish the download or fix the index"
            )
        return WeightMap(weight_map, shards, present, INDEX_NAME)

    files = sorted(p.name for p in folder.glob("*.safetensors"))
    if not files:
        hint = " (found .bin files: convert them to safetensors)" if any(folder.glob("*.bin")) else ""
        raise BadInput(
            f"{folder}: no safetensors weights{hint}; expected {SINGLE_NAME} or {INDEX_NAME} with its shards"
        )
    weight_map = {}
    for name in files:
        for key in read_header(folder / name):
            if key in weight_map:
                raise BadInput(
                    f"{folder}: tensor {key} appears in both {weight_map[key]} and {name}; remove the stray file"
                )
            weight_map[key] = name
    return WeightMap(weight_map, tuple(files), frozenset(files), None)
