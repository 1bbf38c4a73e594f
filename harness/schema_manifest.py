"""manifest.json as the results layer reads it: `Manifest` (the whole file kept as written, the few
facts read from it as properties), its `Owner`, and the `Hardware` and `Artifact` records it holds.
The file's name is harness/schema.py's MANIFEST_FILE; harness/bench/manifest.py writes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

RUNNING, INTERRUPTED = "running", "interrupted"


class Owner(BaseModel):
    """The harness process that runs a run (harness/results/manifest.py: a dead owner's `running`
    run reads as interrupted)."""

    model_config = ConfigDict(frozen=True)

    pid: int | None
    pid_start_ticks: int | None
    hostname: str | None


class Manifest(BaseModel):
    """manifest.json as the results layer reads it. `data` keeps the whole file as written (a
    baseline copies it); provenance, recipe, verifier and drafts are recorded free-form by
    harness/bench/manifest.py, and the few facts read from them are properties here."""

    model_config = ConfigDict(frozen=True)

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
            owner=Owner(
                pid=owner.get("pid"), pid_start_ticks=owner.get("pid_start_ticks"), hostname=owner.get("hostname")
            )
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
        return Hardware(device=hw.get("device"), gpu=hw.get("gpu"), cpu=hw.get("cpu"), platform=hw.get("platform"))

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


class Hardware(BaseModel):
    model_config = ConfigDict(frozen=True)

    device: str | None
    gpu: str | None
    cpu: str | None
    platform: str | None

    def describe(self) -> str:
        return f"{self.device or '?'} — {self.gpu or self.cpu or self.platform or '?'}"


class Artifact(BaseModel):
    """A verifier's or draft's record in the manifest: where it was and its content hash."""

    model_config = ConfigDict(frozen=True)

    path: str | None
    content_hash: str | None  # the sha256 (older manifests stored {"sha256": ...})
    method: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> Artifact:
        d = data if isinstance(data, Mapping) else {}
        h = d.get("content_hash")
        return cls(
            path=d.get("path"), content_hash=h.get("sha256") if isinstance(h, Mapping) else h, method=d.get("method")
        )


Manifest.model_rebuild()
