"""Hardware and model facts the planner, the checks and the reports rely on."""

from pocforge.catalog.gpus import GPU, gpu, gpu_names
from pocforge.catalog.model_facts import ModelFacts, catalog_entry, catalog_names, model_facts

__all__ = [
    "GPU",
    "ModelFacts",
    "catalog_entry",
    "catalog_names",
    "gpu",
    "gpu_names",
    "model_facts",
]
