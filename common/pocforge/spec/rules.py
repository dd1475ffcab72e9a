"""Cross-field rules: what a single field cannot know on its own.

Each rule takes a valid spec and yields ``(field path, message)`` pairs; the loader
locates them in the YAML.  Each has its own test in ``tests/spec/test_rules.py``. The rules
live by section (``serving_rules``, ``training_rules``, ``profile_rules``,
``criteria_rules``, ``disagg_rules``); this module holds the others and the list in the
order they run.
"""

from __future__ import annotations

from collections.abc import Iterator

from pocforge.spec import disagg_rules
from pocforge.spec.criteria_rules import criteria_are_produced
from pocforge.spec.finding import Finding, Rule
from pocforge.spec.profile_rules import profiled_points_exist, profiled_steps_exist
from pocforge.spec.schema import PocSpec
from pocforge.spec.serving_rules import (
    dp_attention_needs_moe,
    expert_parallel_needs_moe,
    platform_switches_apply,
    quantization_has_a_flag,
    serving_fits_cluster,
    serving_fits_memory,
    serving_kernels_run,
    trtllm_deployment_fits,
    turns_follow_their_predecessors,
    workload_names_unique,
)
from pocforge.spec.training_rules import (
    megatron_layout_fits,
    training_fits_cluster,
    training_framework_fields,
    training_init_fits,
)


def competitors_are_comparable(spec: PocSpec) -> Iterator[Finding]:
    """The price basis is one the catalog has, a competitor names one of our workloads, and
    a ``published`` file is not also given a ``published`` block (it carries its own)."""
    from pocforge.catalog.prices import price_bases

    compare = spec.compare
    if compare.price_basis not in price_bases():
        yield (
            ("compare", "price_basis"),
            f"unknown price basis {compare.price_basis!r} (catalog/prices.yaml has: "
            f"{', '.join(price_bases())})",
        )
    ours = [w.name for w in spec.serving.workloads] if spec.serving else []
    for index, comp in enumerate(compare.competitors):
        if comp.workload is not None and comp.workload not in ours:
            yield (
                ("compare", "competitors", index, "workload"),
                f"no workload named {comp.workload!r} (workloads: {', '.join(ours) or 'none'})",
            )
        if comp.format == "published" and comp.published is not None:
            yield (
                ("compare", "competitors", index, "published"),
                "a `published` file names its own source and date; leave this block out",
            )


def gates_have_something_to_check(spec: PocSpec) -> Iterator[Finding]:
    """Parity compares the POC's kit kernels and framework patches against the framework as
    shipped, so it needs one of them; accuracy task names are unique; the gates need vLLM's
    or SGLang's completions with log-probabilities."""
    serving = spec.serving
    if serving is None:
        return
    patches = spec.source_dir / "patches" / serving.framework if spec.source_dir else None
    if (
        serving.parity is not None
        and not serving.kernels
        and not (patches and any(patches.glob("*.patch")))
    ):
        yield (
            ("serving", "parity"),
            "parity compares the POC's kit kernels and framework patches with the framework "
            f"as shipped, and it has neither (serving.kernels is empty, no "
            f"patches/{serving.framework}/*.patch): add one or remove the gate",
        )
    names = [t.name for t in serving.accuracy]
    for index, name in enumerate(names):
        if name in names[:index]:
            yield (
                ("serving", "accuracy", index, "name"),
                f"accuracy task {name!r} is listed twice",
            )


def hosts_match_nodes(spec: PocSpec) -> Iterator[Finding]:
    """Listed hosts are one per node, with unique names."""
    hosts = spec.cluster.hosts
    if hosts and len(hosts) != spec.cluster.nodes:
        yield (("cluster", "hosts"), f"{len(hosts)} hosts listed for {spec.cluster.nodes} nodes")
    names = [h.name for h in hosts]
    for index, name in enumerate(names):
        if name in names[:index]:
            yield (("cluster", "hosts", index, "name"), f"host {name!r} is listed twice")


RULES: list[Rule] = [
    serving_fits_cluster,
    serving_fits_memory,
    expert_parallel_needs_moe,
    dp_attention_needs_moe,
    serving_kernels_run,
    quantization_has_a_flag,
    platform_switches_apply,
    trtllm_deployment_fits,
    training_fits_cluster,
    training_framework_fields,
    training_init_fits,
    megatron_layout_fits,
    competitors_are_comparable,
    gates_have_something_to_check,
    hosts_match_nodes,
    turns_follow_their_predecessors,
    profiled_points_exist,
    profiled_steps_exist,
    workload_names_unique,
    criteria_are_produced,
    *disagg_rules.RULES,
]


def check_rules(spec: PocSpec) -> list[Finding]:
    return [finding for rule in RULES for finding in rule(spec)]
