"""Framework adapters: a resolved spec -> the exact launches, checked by each framework's own
parser, run as managed processes. Framework imports stay inside subprocesses and adapters."""

from __future__ import annotations

from pocforge.frameworks.base import Adapter, LaunchContext, NodeLaunch
from pocforge.frameworks.deepspeed import DeepSpeedAdapter
from pocforge.frameworks.disagg import plan_disaggregated
from pocforge.frameworks.megatron import MegatronAdapter
from pocforge.frameworks.sglang import SglangAdapter
from pocforge.frameworks.trtllm import TrtllmAdapter
from pocforge.frameworks.vllm import VllmAdapter
from pocforge.spec import PocSpec

ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        VllmAdapter(),
        SglangAdapter(),
        TrtllmAdapter(),
        DeepSpeedAdapter(),
        MegatronAdapter(),
    )
}


def plan_all(spec: PocSpec, ctx: LaunchContext) -> list[NodeLaunch]:
    """Every launch of every deployment in ``spec`` (serving first, then training)."""
    launches: list[NodeLaunch] = []
    if spec.serving is not None and spec.serving.disaggregation is not None:
        launches += plan_disaggregated(spec, ctx, ADAPTERS[spec.serving.framework])
    elif spec.serving is not None:
        launches += ADAPTERS[spec.serving.framework].plan(spec, ctx)
    if spec.training is not None:
        launches += ADAPTERS[spec.training.framework].plan(spec, ctx)
    return launches


__all__ = ["ADAPTERS", "LaunchContext", "NodeLaunch", "plan_all"]
