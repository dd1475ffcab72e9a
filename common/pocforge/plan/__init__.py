"""The parallel-layout planner: memory fit, predicted serving and training performance,
the search over layouts, and disaggregated prefill/decode sizing, from first principles
(:mod:`pocforge.plan.shape`, the GPU catalog's rates) plus a small calibration
(``calibration.yaml``). Pure Python: no framework, no GPU."""

from pocforge.plan.disagg import DisaggPlan, plan_disaggregated
from pocforge.plan.hardware import Device
from pocforge.plan.layout import Layout
from pocforge.plan.memory import serving_memory, training_memory, zero_model_states
from pocforge.plan.search import SearchResult, Slos, search_serving, search_training
from pocforge.plan.serving import Serving, ServingPoint, ServingPrediction
from pocforge.plan.shape import Shape, ShapeError
from pocforge.plan.training import Training, TrainingPoint, TrainingPrediction

__all__ = [
    "Device",
    "DisaggPlan",
    "Layout",
    "SearchResult",
    "Serving",
    "ServingPoint",
    "ServingPrediction",
    "Shape",
    "ShapeError",
    "Slos",
    "Training",
    "TrainingPoint",
    "TrainingPrediction",
    "plan_disaggregated",
    "search_serving",
    "search_training",
    "serving_memory",
    "training_memory",
    "zero_model_states",
]
