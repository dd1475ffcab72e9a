"""What every section of the spec shares: the strict model base, the name pattern, the
secret marker and the choice of profiler (serving and training profile alike)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
SECRET = {"secret": True}  # json_schema_extra marking a field that may hold ${ENV} secrets
# json_schema_extra marking a mapping whose values may be a whole ``${ENV}`` reference, kept
# as written: a secret the nodes take by reference (pocforge.runtimes.secrets)
REFERENCES = {"references": True}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


ProfilerTool = Literal["torch", "nsys", "rocprofv3"]
PROFILER_TOOL_HELP = (
    "Which profiler: `torch` (the framework's torch profiler: a Chrome trace and its table "
    "of operations), `nsys` (Nsight Systems around the launch, NVIDIA: a report per profiled "
    "range and its kernel summary) or `rocprofv3` (AMD: kernel trace and `--stats`). The GPU "
    "tools record only the chosen points or steps: the framework's CUDA-profiler switch "
    "gates them."
)
PMC_HELP = (
    "rocprofv3 only: hardware counters collected with the kernel trace (`--pmc`), e.g. "
    "`[SQ_WAVES, GRBM_GUI_ACTIVE]`; at most 8, in one pass."
)


class ProfilerChoice(Strict):
    """Which profiler a serving or training profile runs, and its counters."""

    tool: ProfilerTool = Field("torch", description=PROFILER_TOOL_HELP)
    counters: list[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_:\[\]]*$")]] = Field(
        default_factory=list, max_length=8, description=PMC_HELP
    )

    @model_validator(mode="after")
    def _counters_need_rocprofv3(self) -> ProfilerChoice:
        if self.counters and self.tool != "rocprofv3":
            raise ValueError(
                f"counters are rocprofv3's --pmc; tool is {self.tool}: set tool: rocprofv3 "
                "or remove counters"
            )
        return self
