"""The kit's own files of a run: its manifest (``run.json``: stages, files and their hashes,
who wrote it) and its provenance (the nodes, GPUs, NICs, versions and patches it ran on)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pocforge.results.base import Doc

StageStatus = Literal["running", "complete", "failed", "interrupted", "skipped"]
RunStatus = Literal["running", "complete", "failed", "interrupted"]


class FileEntry(Doc):
    sha256: str | None = Field(description="sha256 of the bytes; None while the file is open.")
    bytes: int = Field(ge=0, description="Size in bytes when last checksummed.")
    open: bool = Field(False, description="Still being appended to (checksummed when closed).")
    replacing: str | None = Field(
        None,
        description="sha256 of the new content while a rewrite is under way: a writer killed "
        "between the rename and the manifest update leaves a file that matches this one.",
    )


class StageRecord(Doc):
    status: StageStatus
    started_at: str
    finished_at: str | None = None
    error: str | None = Field(None, description="Exception type and message of a failed stage.")
    files: list[str] = Field(default_factory=list, description="Files the stage wrote.")


class KitInfo(Doc):
    version: str
    git_sha: str | None
    git_dirty: bool | None


class Writer(Doc):
    host: str
    pid: int


class ImportSource(Doc):
    tool: str
    file: str = Field(description="Original file name (no directory).")
    sha256: str


class RunManifest(Doc):
    """``run.json``: what the run is, what ran, and the checksum of every other file."""

    kind: Literal["pocforge-run"] = "pocforge-run"
    schema_version: Literal[2] = 2
    poc: str
    run_id: str
    status: RunStatus
    created_at: str
    updated_at: str
    spec: dict[str, Any] | None = Field(description="Resolved spec, secrets masked.")
    spec_hash: str | None
    kit: KitInfo
    writer: Writer | None = Field(None, description="Process writing the run (for liveness).")
    hosts: list[str] = Field(default_factory=list)
    stages: dict[str, StageRecord] = Field(default_factory=dict)
    files: dict[str, FileEntry] = Field(default_factory=dict, description="Path -> checksum.")
    imported_from: ImportSource | None = None


class GpuInfo(Doc):
    index: int
    name: str
    vendor: Literal["amd", "nvidia", "other"]
    arch: str | None = None
    memory_gb: float | None = None
    driver: str | None = None
    firmware: str | None = Field(None, description="VBIOS / firmware version.")
    pci_bus: str | None = None


class NicInfo(Doc):
    name: str
    driver: str | None = None
    speed_mbps: int | None = None
    mtu: int | None = None
    rdma_device: str | None = None
    firmware: str | None = None


class HostFacts(Doc):
    hostname: str
    source: Literal["local", "ansible", "imported"] = "local"
    collected_at: str
    os: str | None = None
    kernel: str | None = None
    python: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_gb: float | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    nics: list[NicInfo] = Field(default_factory=list)
    stacks: dict[str, str | None] = Field(
        default_factory=dict, description="rocm, cuda, amdgpu/nvidia driver versions."
    )
    packages: dict[str, str | None] = Field(
        default_factory=dict, description="Framework and kernel-library versions."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Relevant environment variables, secrets removed."
    )


class PatchInfo(Doc):
    path: str
    sha256: str
    # a patch file's header (pocforge.frameworks.patching.files): what it is for and its way
    # to product; None for another file of patches/ or a header that does not parse
    framework: str | None = None
    version: str | None = Field(None, description="The framework version it is pinned to.")
    reason: str | None = Field(None, description="Why it exists (its description).")
    serves: str | None = None
    upstream: str | None = None
    state: str | None = Field(None, description="proposed, merged in <version>, carried, dropped.")
    owner: str | None = None


class Provenance(Doc):
    """``provenance.json``: where and with what the numbers were produced."""

    kind: Literal["pocforge-provenance"] = "pocforge-provenance"
    schema_version: Literal[1] = 1
    collected_at: str
    hosts: list[HostFacts] = Field(default_factory=list)
    patches: list[PatchInfo] = Field(default_factory=list)
