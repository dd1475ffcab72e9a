"""The POC spec: the whole ``pocs/<name>/poc.yaml`` (:class:`PocSpec`) and its ``poc:`` section;
each other section's models live in a module of their own (``model_schema``, ``cluster_schema``,
``serving_schema``, ``training_schema``, ``kernels_schema``, ``acceptance_schema``,
``compare_schema``), their shared base in ``base``.

Every field has a description; ``pocs/SPEC.md`` is generated from them
(``pocforge schema --markdown``) and a test keeps it in sync.  Models forbid unknown
keys so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    PrivateAttr,
    model_validator,
)

from pocforge.spec.acceptance_schema import AcceptanceSpec
from pocforge.spec.base import NAME_PATTERN, Strict
from pocforge.spec.cluster_schema import ClusterSpec
from pocforge.spec.compare_schema import CompareSpec
from pocforge.spec.kernels_schema import KernelsSpec
from pocforge.spec.model_schema import ModelSpec
from pocforge.spec.serving_schema import ServingSpec
from pocforge.spec.training_schema import TrainingSpec


class PocMeta(Strict):
    name: str = Field(
        pattern=NAME_PATTERN,
        description="POC name; must equal its folder name. Convention: `<model>-<precision>-<gpu>-<framework>`, then `-pd` for a disaggregated deployment and `-slurm` for a cluster Slurm owns.",
    )
    customer: str = Field(min_length=1, description="Customer the POC is for.")
    owner: str = Field(min_length=1, description="Engineer responsible (name or e-mail).")
    description: str = Field(
        "", description="What the customer wants proven, in a sentence or two."
    )
    tags: list[str] = Field(default_factory=list, description="Free-form labels for `pocforge ls`.")
    language: Literal["en", "zh-CN"] = Field(
        "en",
        description="The language of the customer's dashboard and PDF (`pocforge report RUN --lang` renders any run in another, without re-running).",
    )


class PocSpec(Strict):
    """A customer POC: what to deploy where, what to run, and what counts as success."""

    include: str | list[str] | None = Field(
        None,
        description="Spec(s) to inherit from, relative to this file; deep merge, lists replace.",
        exclude=True,
    )
    poc: PocMeta = Field(description="Who and what the POC is.")
    model: ModelSpec = Field(description="The model under test.")
    cluster: ClusterSpec = Field(description="Where it runs.")
    serving: ServingSpec | None = Field(None, description="Serving deployment and workloads.")
    training: TrainingSpec | None = Field(None, description="Training benchmark.")
    kernels: KernelsSpec | None = Field(None, description="Kernel acceptance.")
    acceptance: AcceptanceSpec = Field(
        default_factory=AcceptanceSpec, description="Acceptance criteria."
    )
    compare: CompareSpec = Field(
        default_factory=CompareSpec, description="Baselines and competitors."
    )

    _file: Path | None = PrivateAttr(None)
    _hash: str = PrivateAttr("")
    _unset_secrets: list = PrivateAttr(default_factory=list)

    def require_secrets(self) -> None:
        """Raise ``SpecError`` if a secret's ``${VAR}`` is not set (call before using secrets)."""
        if self._unset_secrets:
            from pocforge.spec.errors import SpecError

            raise SpecError(list(self._unset_secrets))

    @model_validator(mode="after")
    def _global_batch_sets_accumulation(self) -> PocSpec:
        """``training.global_batch`` becomes the gradient accumulation it needs."""
        training = self.training
        if training is None or training.global_batch is None:
            return self
        dp = training.data_parallel(self.cluster.total_gpus)
        per_step = training.micro_batch * dp
        if dp < 1 or training.global_batch % per_step:
            fits = max(per_step, training.global_batch // per_step * per_step)
            raise ValueError(
                f"training.global_batch {training.global_batch} is not a multiple of "
                f"micro_batch · dp = {training.micro_batch} · {dp} = {per_step}: set it to "
                f"{fits} or {fits + per_step}"
            )
        accum = training.global_batch // per_step
        if "grad_accum" in training.model_fields_set and training.grad_accum != accum:
            raise ValueError(
                f"training.grad_accum {training.grad_accum} and global_batch "
                f"{training.global_batch} disagree (micro_batch · dp · grad_accum = "
                f"{per_step * training.grad_accum}): set one of them"
            )
        training.grad_accum = accum
        return self

    @property
    def source_file(self) -> Path | None:
        return self._file

    @property
    def source_dir(self) -> Path | None:
        return self._file.parent if self._file else None

    @property
    def spec_hash(self) -> str:
        """sha256 of the resolved spec (secrets excluded), for provenance."""
        return self._hash

    @property
    def name(self) -> str:
        return self.poc.name
