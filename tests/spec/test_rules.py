"""Each cross-field rule, on a spec that breaks only that rule."""

from __future__ import annotations

import json

import pytest

from pocforge.spec import SpecError

from .conftest import MOE_FACTS


def messages(load, data) -> list[str]:
    with pytest.raises(SpecError) as info:
        load(data)
    return [str(p) for p in info.value.problems]


def sglang_moe(good, **parallelism):
    good["model"]["facts"] = dict(MOE_FACTS)
    good["serving"]["framework"] = "sglang"
    good["serving"]["parallelism"] = parallelism
    return good


# serving parallelism must use the cluster's GPUs -------------------------------------------


def test_serving_parallelism_must_match_gpus(load, good):
    good["serving"]["parallelism"] = {"tp": 4}
    (msg,) = messages(load, good)
    assert (
        "serving.parallelism: tp×pp×dp×replicas = 4 but the cluster has 8 GPUs (1 nodes × 8)" in msg
    )


def test_replicas_make_up_the_difference(load, good):
    good["serving"]["parallelism"] = {"tp": 4}
    good["serving"]["replicas"] = 2
    assert load(good).serving.replicas == 2


def test_dp_attention_counts_gpus_inside_tp(load, good):
    good["cluster"].update(nodes=2)
    spec = load(sglang_moe(good, tp=16, dp=16, ep=16, dp_attention=True))
    assert spec.serving.parallelism.dp == 16  # 16 GPUs, not 256


def test_dp_attention_dp_must_divide_tp(load, good):
    msgs = messages(load, sglang_moe(good, tp=8, dp=3, dp_attention=True))
    assert any("with dp_attention, dp (3) must divide tp (8)" in m for m in msgs), msgs


# expert parallelism --------------------------------------------------------------------------


def test_ep_refused_for_dense_models(load, good):
    good["serving"]["parallelism"] = {"tp": 8, "ep": 8}
    (msg,) = messages(load, good)
    assert "ep = 8 but org/dense-8b is a dense model" in msg


def test_ep_needs_known_moe_facts(load, good):
    good["model"].pop("facts")
    good["serving"]["parallelism"] = {"tp": 8, "ep": 8}
    (msg,) = messages(load, good)
    assert "cannot tell whether the model is MoE; add model.facts.experts" in msg


def test_sglang_splits_the_experts_inside_the_tp_group(load, good):
    """SGLang 0.5.23 derives moe_tp_size = tp // ep: ep must divide tp, whatever dp is
    (2 x 8 replicas of tp 2 cannot spread 16-way expert groups)."""
    good["cluster"].update(nodes=2)
    msgs = messages(load, sglang_moe(good, tp=2, dp=8, ep=16))
    assert any("sglang splits the experts inside the tp group: ep (16) must divide tp (2)" in m
               for m in msgs), msgs  # fmt: skip
    good["cluster"].update(nodes=1)
    assert load(sglang_moe(good, tp=8, ep=4)).serving.parallelism.ep == 4  # 4 divides 8


def test_dp_attention_needs_dp_groups(load, good):
    """{tp: 8, ep: 8, dp_attention: true} without dp printed --attn-dp-size 1 and passed."""
    msgs = messages(load, sglang_moe(good, tp=8, ep=8, dp_attention=True))
    assert any("dp_attention splits tp into dp attention groups, and dp is 1" in m for m in msgs), (
        msgs
    )


def test_vllm_expert_parallel_spans_tp_times_dp(load, good):
    good["model"]["facts"] = dict(MOE_FACTS)
    good["serving"]["parallelism"] = {"tp": 8, "ep": 4}
    (msg,) = messages(load, good)
    assert "vLLM's expert parallelism spans all tp×dp = 8 GPUs; set ep to 8" in msg


def test_experts_split_evenly_over_ep(load, good):
    good["model"]["facts"] = {**MOE_FACTS, "experts": 60}
    good["serving"]["parallelism"] = {"tp": 8, "ep": 8}
    (msg,) = messages(load, good)
    assert "60 experts do not split evenly over ep = 8" in msg


def test_moe_facts_come_from_a_local_config_json(load, good, tmp_path):
    model = tmp_path / "good" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text(
        json.dumps({"num_hidden_layers": 2, "num_experts": 8, "num_experts_per_tok": 2})
    )
    good["model"] = {"id": "model"}
    good["serving"]["parallelism"] = {"tp": 8, "ep": 8}
    assert load(good).serving.parallelism.ep == 8


# DP-attention -------------------------------------------------------------------------------


def test_dp_attention_needs_moe(load, good):
    good["serving"].update(framework="sglang", parallelism={"tp": 8, "dp": 8, "dp_attention": True})
    (msg,) = messages(load, good)
    assert "dp_attention only helps MoE models" in msg


def test_dp_attention_is_sglang_only(load, good):
    good["model"]["facts"] = dict(MOE_FACTS)
    good["serving"]["parallelism"] = {"tp": 8, "dp": 8, "dp_attention": True}
    (msg,) = messages(load, good)
    assert "dp_attention is an SGLang option" in msg


# training -------------------------------------------------------------------------------------


def training(**overrides):
    return {"framework": "deepspeed", "seq_len": 128, "steps": 4, **overrides}


def test_training_world_size_divides_gpus(load, good):
    good["training"] = training(world_size=3)
    (msg,) = messages(load, good)
    assert "training.world_size: world size 3 does not divide the cluster's 8 GPUs" in msg


def test_training_world_size_free_on_cpu(load, good):
    good.pop("serving")
    good["acceptance"]["criteria"] = []
    good["cluster"] = {"gpu": "cpu", "gpus_per_node": 1}
    good["training"] = training(world_size=2, dtype="float32")
    assert load(good).training.world_size == 2


def test_fp16_training_refused_on_cpu(load, good):
    good.pop("serving")
    good["acceptance"]["criteria"] = []
    good["cluster"] = {"gpu": "cpu", "gpus_per_node": 1}
    good["training"] = training(dtype="float16")
    (msg,) = messages(load, good)
    assert "DeepSpeed refuses float16 on CPU" in msg


# megatron ---------------------------------------------------------------------------------


def megatron(good, **layout):
    good.pop("serving")
    good["acceptance"]["criteria"] = []
    good["training"] = training(framework="megatron", megatron=layout)
    return good


@pytest.mark.parametrize(
    ("layout", "changes", "expected"),
    [
        ({"tp": 3}, {}, "tp·pp·cp = 3·1·1 = 3 does not divide the 8 training GPUs"),
        ({"pp": 8}, {"layers": 30}, "pp 8 does not divide the model's 30 layers"),
        ({"tp": 2, "pp": 2, "vpp": 3}, {}, "32 layers do not split into pp·vpp = 6 chunks"),
        ({"tp": 2, "vpp": 2}, {}, "virtual pipeline stages need pp > 1"),
        ({"tp": 2, "cp": 2}, {"seq_len": 130}, "seq_len 130 must be divisible by 2·cp = 4"),
        ({"sequence_parallel": True}, {}, "sequence parallelism needs tp > 1"),
        ({"tp": 2, "ep": 2}, {}, "expert parallelism is for MoE models"),
    ],
)
def test_megatron_layout_rules(load, good, layout, changes, expected):
    data = megatron(good, **layout)
    if "layers" in changes:
        data["model"]["facts"]["layers"] = changes["layers"]
    if "seq_len" in changes:
        data["training"]["seq_len"] = changes["seq_len"]
    msgs = messages(load, data)
    assert any(expected in m for m in msgs), msgs


def test_megatron_query_groups_must_fit_tp(load, good):
    good["model"]["facts"]["kv_heads"] = 3
    good["model"]["facts"]["heads"] = 48
    msgs = messages(load, megatron(good, tp=8))
    assert any("tp 8 and the model's 3 query groups" in m for m in msgs), msgs


def test_megatron_experts_split_over_ep(load, good):
    good["model"]["facts"] = dict(MOE_FACTS)
    msgs = messages(load, megatron(good, tp=1, ep=3))
    assert any("ep 3 does not divide the 256 experts" in m for m in msgs), msgs


def test_megatron_good_moe_layout_loads(load, good):
    good["model"]["facts"] = dict(MOE_FACTS)
    spec = load(megatron(good, tp=1, ep=8))
    assert spec.training.megatron.ep == 8


def test_deepspeed_fields_refused_with_megatron(load, good):
    data = megatron(good, tp=8)
    data["training"]["zero_stage"] = 3
    msgs = messages(load, data)
    assert any("training.zero_stage: zero_stage is a DeepSpeed setting" in m for m in msgs), msgs


def test_megatron_block_refused_with_deepspeed(load, good):
    data = megatron(good, tp=8)
    data["training"]["framework"] = "deepspeed"
    msgs = messages(load, data)
    assert any("the megatron block is for framework: megatron" in m for m in msgs), msgs


def test_megatron_on_cpu_refuses_what_the_cpu_driver_cannot_run(load, good):
    good["cluster"] = {"gpu": "cpu", "gpus_per_node": 2}
    data = megatron(good, tp=2, sequence_parallel=True, distributed_optimizer=True)
    msgs = messages(load, data)
    assert any("training.dtype: Megatron on cpu trains float32 only" in m for m in msgs), msgs
    for name in ("distributed_optimizer", "sequence_parallel"):
        assert any(f"{name} needs a GPU node" in m for m in msgs), msgs


def test_dataset_needs_path_and_tokenizer(load, good):
    data = megatron(good, tp=8, data={"kind": "dataset", "path": "/data/x_text_document"})
    msgs = messages(load, data)
    assert any("a `dataset` needs both `path` and `tokenizer`" in m for m in msgs), msgs


# hosts and names ----------------------------------------------------------------------------


def test_hosts_one_per_node(load, good):
    good["cluster"]["hosts"] = [
        {"name": "a", "address": "198.51.100.1"},
        {"name": "b", "address": "198.51.100.2"},
    ]
    (msg,) = messages(load, good)
    assert "cluster.hosts: 2 hosts listed for 1 nodes" in msg


def test_host_names_unique(load, good):
    good["cluster"]["nodes"] = 2
    good["serving"]["replicas"] = 2
    good["cluster"]["hosts"] = [
        {"name": "a", "address": "198.51.100.1"},
        {"name": "a", "address": "198.51.100.2"},
    ]
    (msg,) = messages(load, good)
    assert "cluster.hosts.1.name: host 'a' is listed twice" in msg


def test_workload_names_unique(load, good):
    good["serving"]["workloads"].append(dict(good["serving"]["workloads"][0]))
    (msg,) = messages(load, good)
    assert "serving.workloads.1.name: workload 'chat' is defined twice" in msg


# acceptance criteria name produced metrics -------------------------------------------------------


@pytest.mark.parametrize(
    ("criterion", "expected"),
    [
        ("serving.chatt.ttft_ms.p99 <= 1", "no workload named 'chatt' (workloads: chat)"),
        ("serving.chat.ttfx_ms.p99 <= 1", "unknown serving metric 'ttfx_ms'"),
        ("serving.chat.ttft_ms <= 1", "ttft_ms is a distribution: add a statistic"),
        ("serving.chat.ttft_ms.p42 <= 1", "unknown statistic 'p42'"),
        ("serving.chat.goodput.p99 >= 1", "goodput is a single number per run; drop 'p99'"),
        ("training.mfu >= 0.3", "the spec has no training section"),
        ("kernels.fused_moe.pct_roofline >= 60", "kernel 'fused_moe' is not in kernels.ops"),
        ("collectives.broadcast.busbw_gbs >= 1", "write collectives.<collective>.<metric>"),
        ("collectives.ep_gather.rdma_gbs >= 1", "or an expert-parallel phase of ep_dispatch"),
        (
            "collectives.all_reduce.rdma_gbs >= 1",
            "rdma_gbs is not a metric of an nccl-tests collective (allowed: busbw_gbs, "
            "pct_reference, wrong)",
        ),
        (
            "collectives.ep_dispatch.busbw_gbs >= 1",
            "busbw_gbs is not a metric of an expert-parallel phase (allowed: rdma_gbs, nvl_gbs, "
            "xgmi_gbs, ll_gbs, total_gbs, latency_us)",
        ),
        ("collectives.ep_combine.latency_us.p99 <= 1", "latency_us is a single number per run"),
        (
            "latency.p99 <= 1",
            "a metric path starts with serving, training, kernels, collectives, accuracy or parity",
        ),
    ],
)
def test_criteria_must_name_a_produced_metric(load, good, criterion, expected):
    good["acceptance"]["criteria"] = [criterion]
    (msg,) = messages(load, good)
    assert "acceptance.criteria.0.metric" in msg and expected in msg, msg


def test_criteria_accept_p99_9_and_the_mapping_form(load, good):
    good["acceptance"]["criteria"] = [
        "serving.chat.itl_ms.p99.9 < 100",
        {"metric": "serving.chat.goodput", "op": ">=", "threshold": 2, "confidence": 0.9},
        "collectives.all_reduce.pct_reference >= 95",
    ]
    criteria = load(good).acceptance.criteria
    assert criteria[0].parts == ["serving", "chat", "itl_ms", "p99.9"]
    assert str(criteria[1]) == "serving.chat.goodput >= 2" and criteria[1].confidence == 0.9


def test_expert_parallel_criteria_validate(load, good):
    """DeepEP / MoRI phases, with their precision variants, take the EP metrics."""
    good["acceptance"]["criteria"] = [
        "collectives.ep_dispatch.rdma_gbs >= 40",
        "collectives.ep_dispatch_fp8.nvl_gbs >= 150",
        "collectives.ep_combine_bf16.xgmi_gbs >= 200",
        "collectives.ep_dispatch_combine.total_gbs >= 10",
        "collectives.ep_combine.latency_us <= 2000",
    ]
    criteria = load(good).acceptance.criteria
    assert [c.parts[1] for c in criteria] == [
        "ep_dispatch",
        "ep_dispatch_fp8",
        "ep_combine_bf16",
        "ep_dispatch_combine",
        "ep_combine",
    ]


def test_expert_parallel_criteria_need_a_gpu(load, good):
    """DeepEP and MoRI run on GPUs only: a `cpu` cluster never prints these numbers."""
    good["cluster"] = {"gpu": "cpu", "gpus_per_node": 1}
    good["serving"]["parallelism"] = {"tp": 1}
    good["acceptance"]["criteria"] = ["collectives.ep_dispatch.rdma_gbs >= 40"]
    (msg,) = messages(load, good)
    assert (
        "ep_dispatch.rdma_gbs: rdma_gbs is measured on a GPU only (DeepEP and MoRI run on GPUs "
        "only)" in msg
    ), msg


def test_unknown_gpu_lists_the_catalog(load, good):
    good["cluster"]["gpu"] = "mi300x"
    (msg,) = messages(load, good)
    assert (
        "unknown GPU type 'mi300x' (allowed: MI300X, MI325X, MI355X, H100, H200, B200, cpu)" in msg
    )


# criteria the judge could never decide ---------------------------------------------------


def test_goodput_needs_the_workloads_slos(load, good):
    """Goodput counts requests within every SLO: without SLOs it is never reported."""
    good["serving"]["workloads"][0]["slos"] = []
    good["acceptance"]["criteria"] = ["serving.chat.goodput >= 2"]
    (msg,) = messages(load, good)
    assert "acceptance.criteria.0.metric: serving.chat.goodput: goodput counts requests" in msg
    assert "'chat' has none" in msg and "add slos to the workload" in msg


def test_mfu_needs_a_dtype_with_a_peak(load, good):
    """The benchmark claims a dense peak for bf16/fp16 only, so fp32 MFU is never computed."""
    good["training"] = training(dtype="float32")
    good["acceptance"]["criteria"] = ["training.mfu >= 0.3"]
    (msg,) = messages(load, good)
    assert (
        "mfu needs the GPU's dense peak for the training dtype; none is claimed for float32" in msg
    )
    good["training"] = training(dtype="bfloat16")
    assert load(good).training.dtype == "bfloat16"


def test_gpu_only_metrics_are_refused_on_a_cpu_cluster(load, good):
    """Kernel times under the Triton interpreter are not measured; correctness is."""
    good.pop("serving")
    good["cluster"] = {"gpu": "cpu", "gpus_per_node": 1}
    good["kernels"] = {"ops": [{"op": "rms_norm"}]}
    good["acceptance"]["criteria"] = [
        "kernels.rms_norm.max_rel_error <= 0.02",
        "kernels.rms_norm.pct_roofline >= 50",
    ]
    (msg,) = messages(load, good)
    assert (
        "criteria.1.metric: kernels.rms_norm.pct_roofline: pct_roofline is measured on a GPU only"
        in msg
    )


# serving kernels run where they are listed ---------------------------------------------


@pytest.mark.parametrize(
    ("framework", "model", "parallelism", "kernels", "expected"),
    [
        (
            "vllm",
            {},
            {"tp": 8},
            ["rms_norm", "mla_decode"],
            "serving.kernels.1: mla_decode will not run: vllm has no layer the kit's mla_decode",
        ),
        (
            "sglang",
            {"facts": MOE_FACTS},
            {"tp": 8, "ep": 8},
            ["fused_moe"],
            "fused_moe will not run: the kit's fused_moe replaces sglang's "
            "UnquantizedFusedMoEMethod: it declines expert parallelism (ep > 1)",
        ),
        (
            "vllm",
            {"facts": MOE_FACTS, "quantization": "fp8"},
            {"tp": 8},
            ["fused_moe"],
            "a fp8 checkpoint runs vllm's quantized MoE method",
        ),
        ("sglang", {}, {"tp": 8}, ["fp8_gemm"], "sglang has no layer the kit's fp8_gemm"),
    ],
)
def test_serving_kernels_that_will_not_run_are_refused(
    load, good, framework, model, parallelism, kernels, expected
):
    good["serving"].update(framework=framework, parallelism=parallelism, kernels=kernels)
    good["model"].update(model)
    (msg,) = messages(load, good)
    assert expected in msg and "remove it from serving.kernels" in msg, msg


def test_serving_kernels_that_run_are_accepted(load, good):
    """Unquantized MoE without EP: every op with a layer runs, in both frameworks."""
    good["model"]["facts"] = dict(MOE_FACTS)
    ops = ["rms_norm", "silu_and_mul", "gelu_and_mul", "rotary_embedding", "fused_moe"]
    for framework in ("vllm", "sglang"):
        good["serving"].update(framework=framework, kernels=ops)
        assert load(good).serving.kernels == ops


@pytest.mark.parametrize("framework", ["vllm", "sglang"])
def test_the_rule_and_the_plugins_read_one_table(framework):
    """An op validate accepts in a plain layout is exactly an op the framework's plugin
    registers; an op it refuses, the plugin skips."""
    from pocforge.spec.kernels_schema import KERNEL_OPS
    from pocforge_kernels.integrations.sglang_hook import SGLANG_OPS
    from pocforge_kernels.integrations.support import serving_problem
    from pocforge_kernels.integrations.vllm_plugin import LAYERS

    registered = set(LAYERS) if framework == "vllm" else set(SGLANG_OPS)
    accepted = {
        op
        for op in KERNEL_OPS
        if serving_problem(
            framework, op, dtype="bfloat16", quantization="none", expert_parallel=False
        )
        is None
    }
    assert accepted == registered and "fused_moe" in accepted and "mla_decode" not in accepted


# multi-turn and doc-QA workloads ------------------------------------------------------------


def test_multi_turn_with_a_user_per_request_in_flight_loads(load, good):
    good["serving"]["workloads"][0]["dataset"] = {
        "kind": "multi_turn",
        "users": 8,  # the good spec sweeps concurrency up to 8
        "turns": 3,
        "question_len": 32,
        "answer_len": 64,
        "osl": 64,
    }
    good["serving"]["workloads"][0]["num_prompts"] = 24
    assert load(good).serving.workloads[0].dataset.turns == 3


def test_multi_turn_refuses_fewer_users_than_requests_in_flight(load, good):
    good["serving"]["workloads"][0]["dataset"] = {
        "kind": "multi_turn",
        "users": 4,
        "turns": 3,
        "question_len": 32,
        "answer_len": 64,
        "osl": 64,
    }
    good["serving"]["workloads"][0]["num_prompts"] = 10
    found = " | ".join(messages(load, good))
    assert "num_prompts: the multi_turn dataset sends 4 × 3 = 12 requests per repeat" in found
    assert "users: 4 users but up to 8 requests in flight: a turn would be sent before" in found


def test_a_profiled_point_is_one_of_the_workloads(load, good):
    good["serving"]["workloads"][0]["profile"] = {"points": ["c8"]}
    assert load(good).serving.workloads[0].profile.points == ["c8"]
    good["serving"]["workloads"][0]["profile"] = {"points": ["c8", "c16"]}
    (msg,) = messages(load, good)
    assert "profile.points.1: 'c16' is not a point of workload chat (c1, c8)" in msg


def test_profiled_training_steps_are_steps_of_the_run(load, good):
    good["training"] = training(profile={"steps": [1, 2]})
    assert load(good).training.profile.steps == [1, 2]
    steps = good["training"]["steps"]
    good["training"]["profile"] = {"steps": [1, steps]}
    (msg,) = messages(load, good)
    assert f"training.profile.steps.1: step {steps} is not a step of the run" in msg
    good["training"]["profile"] = {"steps": [1]}
    good["training"]["framework"] = "megatron"  # Megatron-LM's own profiler flags
    assert load(good).training.profile.steps == [1]


def test_a_gpu_profiler_must_profile_the_clusters_gpus(load, good):
    """The good spec is MI300X: rocprofv3 profiles it; nsys is refused and pointed to
    rocprofv3; on a CPU cluster both are refused and pointed to torch's profiler."""
    workload = good["serving"]["workloads"][0]
    workload["profile"] = {"points": ["c8"], "tool": "rocprofv3", "counters": ["SQ_WAVES"]}
    assert load(good).serving.workloads[0].profile.tool == "rocprofv3"
    workload["profile"] = {"points": ["c8"], "tool": "nsys"}
    (msg,) = messages(load, good)
    assert (
        "serving.workloads.0.profile.tool: nsys profiles NVIDIA GPUs and cluster.gpu is "
        "MI300X (AMD): use tool: rocprofv3 or torch"
    ) in msg
    good["training"] = training(profile={"steps": [1], "tool": "nsys"})
    workload.pop("profile")
    (msg,) = messages(load, good)
    assert "training.profile.tool: nsys profiles NVIDIA GPUs" in msg
    good["training"]["profile"]["tool"] = "rocprofv3"
    assert load(good).training.profile.tool == "rocprofv3"
    good["cluster"]["gpu"] = "cpu"
    found = " | ".join(messages(load, good))
    assert (
        "training.profile.tool: rocprofv3 profiles AMD GPUs and cluster.gpu is cpu (no GPU): "
        "use tool: torch (the default)"
    ) in found


def test_counters_are_rocprofv3s(load, good):
    good["serving"]["workloads"][0]["profile"] = {"points": ["c8"], "counters": ["SQ_WAVES"]}
    (msg,) = messages(load, good)
    assert "counters are rocprofv3's --pmc; tool is torch: set tool: rocprofv3" in msg


def test_one_server_one_profiler_and_rocprofv3_one_point(load, good):
    """rocprofv3 writes at the server's exit, so one point per serving stage; and the
    workloads share the server, so they share its profiler."""
    first = good["serving"]["workloads"][0]
    second = {**first, "name": "again"}
    good["serving"]["workloads"].append(second)
    first["profile"] = {"points": ["c1"], "tool": "rocprofv3"}
    second["profile"] = {"points": ["c8"], "tool": "rocprofv3"}
    (msg,) = messages(load, good)
    assert (
        "serving.workloads.1.profile.points: rocprofv3 writes its files when the server "
        "exits, so a serving stage profiles one point with it (chat c1, again c8): keep one"
    ) in msg
    second["profile"] = {"points": ["c8"]}
    (msg,) = messages(load, good)
    assert (
        "serving.workloads.1.profile.tool: one server serves every workload, so one "
        "profiler: workload chat uses rocprofv3 and again torch; give both the same tool"
    ) in msg


def test_a_criterion_may_name_a_point_of_its_workload(load, good):
    """Each point has its own throughput: ``….output_throughput.c1`` is judged there; a point
    the sweep does not run is refused, naming the ones it does."""
    good["acceptance"] = {"criteria": ["serving.chat.output_throughput.c1 >= 10"]}
    assert load(good).acceptance.criteria[0].point == "c1"
    good["acceptance"] = {"criteria": ["serving.chat.output_throughput.c32 >= 10"]}
    (msg,) = messages(load, good)
    assert "'c32' is not a point of workload chat" in msg
