"""``pocforge plan predict`` (one serving point, no POC file: scriptable, for replaying
published results) and ``pocforge plan disagg`` (the prefill:decode split that meets two
SLOs at the fewest GPUs)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml
from rich.table import Table

from pocforge.cli.common import fail
from pocforge.cli.plan import console


def resolve_model(value: str):
    """Facts for ``--model``: a catalog name or Hugging Face id, a model folder or its
    ``config.json``, or a facts file (YAML/JSON of ModelFacts fields)."""
    from pydantic import ValidationError

    from pocforge.catalog import ModelFacts, catalog_entry
    from pocforge.catalog.model_facts import facts_from_config

    path = Path(value)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise click.BadParameter(f"{path}: not readable as JSON or YAML ({exc})") from None
        if not isinstance(data, dict):
            raise click.BadParameter(f"{path}: expected a mapping of model facts")
        if path.name == "config.json" or "num_hidden_layers" in data:
            return facts_from_config(data)
        try:
            return ModelFacts(**data)
        except ValidationError as exc:
            raise click.BadParameter(f"{path}: not model facts: {exc.errors()[0]['msg']}") from None
    try:
        return catalog_entry(value)
    except KeyError as exc:
        raise click.BadParameter(str(exc.args[0])) from None


def _model_and_gpu(command):
    """The model and GPU options ``predict`` and ``disagg`` share."""
    command = click.option(
        "--gpu", "gpu_name", required=True, help="GPU type (the catalog's names)."
    )(command)
    return click.option(
        "--model",
        "model_name",
        required=True,
        help="Catalog name, Hugging Face id, model folder, config.json or facts file.",
    )(command)


def _lengths(isl: int, osl: int):
    """``--isl`` and ``--osl`` with these defaults."""

    def add(command):
        command = click.option("--osl", type=click.IntRange(min=1), default=osl, show_default=True)(
            command
        )
        return click.option("--isl", type=click.IntRange(min=1), default=isl, show_default=True)(
            command
        )

    return add


@click.command("predict")
@_model_and_gpu
@click.option("--gpus", type=click.IntRange(min=1), help="GPUs in all (default: the layout's).")
@click.option(
    "--gpus-per-node", type=click.IntRange(min=1), help="Default: the GPU's reference platform."
)
@click.option(
    "--kind", type=click.Choice(["serving", "training"]), default="serving", show_default=True
)
@click.option(
    "--framework", type=click.Choice(["vllm", "sglang", "trtllm", "megatron", "deepspeed"])
)
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--dp", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--ep", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--cp", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--vpp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Virtual pipeline stages per GPU (Megatron).",
)
@click.option("--dp-attention", is_flag=True, help="SGLang's DP attention (dp groups inside tp).")
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16", "fp8", "fp4"]),
    default="bf16",
    show_default=True,
)
@click.option(
    "--kv-dtype",
    type=click.Choice(["fp32", "bf16", "fp8"]),
    help="Default: fp8 with --precision fp8/fp4, else bf16.",
)
@_lengths(isl=1024, osl=1024)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Clients in flight over all GPUs.",
)
@click.option("--seq-len", type=click.IntRange(min=1), default=4096, show_default=True)
@click.option(
    "--global-batch",
    type=click.IntRange(min=1),
    help="Sequences per step (default: dp × micro-batch).",
)
@click.option("--micro-batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--zero",
    type=click.IntRange(0, 3),
    default=None,
    help="DeepSpeed ZeRO stage (Megatron: its distributed optimizer is 1).",
)
@click.option(
    "--recompute",
    type=click.Choice(["none", "selective", "full"]),
    default="none",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as JSON.")
def predict_cmd(
    model_name,
    gpu_name,
    gpus,
    gpus_per_node,
    kind,
    framework,
    tp,
    pp,
    dp,
    ep,
    cp,
    vpp,
    dp_attention,
    precision,
    kv_dtype,
    isl,
    osl,
    concurrency,
    seq_len,
    global_batch,
    micro_batch,
    zero,
    recompute,
    as_json,
) -> None:
    """Predict one serving or training point."""
    from pocforge.plan import (
        Device,
        Layout,
        Serving,
        ServingPoint,
        Shape,
        ShapeError,
        Training,
        TrainingPoint,
    )

    facts = resolve_model(model_name)
    try:
        device = Device.of(gpu_name, gpus_per_node)
    except KeyError as exc:
        fail(f"--gpu: {exc.args[0]}")
    try:
        shape = Shape(facts)
    except ShapeError as exc:
        fail(f"--model {model_name}: {exc}; give a facts file with them")
    framework = framework or ("vllm" if kind == "serving" else "megatron")
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        cp=cp,
        dp_attention=dp_attention,
        zero=zero if zero is not None else (1 if framework == "megatron" else 0),
        micro_batch=micro_batch,
        vpp=vpp,
        recompute=recompute,
    )
    total = gpus or layout.gpus
    if total % layout.gpus:
        fail(
            f"--gpus {total} is not a multiple of the layout's {layout.gpus} GPUs ({layout.label()})"
        )
    replicas = total // layout.gpus
    if kind == "serving":
        if framework in ("megatron", "deepspeed"):
            fail(f"--framework {framework} trains; serving takes vllm, sglang or trtllm")
        kv = kv_dtype or ("fp8" if precision in ("fp8", "fp4") else "bf16")
        model = Serving(shape, layout, device, framework, precision, kv)
        per_replica = max(1, concurrency // replicas)
        out = model.predict(ServingPoint(isl, osl, per_replica)).as_dict()
        out |= {
            "kind": "serving",
            "model": model_name,
            "gpu": gpu_name,
            "gpus": total,
            "replicas": replicas,
            "concurrency": concurrency,
        }
        keys = ("output_tput_per_gpu", "ttft_ms", "tpot_ms", "fits")
    else:
        if framework not in ("megatron", "deepspeed"):
            fail(f"--framework {framework} serves; training takes megatron or deepspeed")
        if gpus and gpus != layout.gpus:
            fail(
                f"--gpus {gpus}: a training job runs on its layout's tp×pp×cp×dp = "
                f"{layout.gpus} GPUs ({layout.label()}); set --dp {gpus // (tp * pp * cp)} instead"
            )
        batch = global_batch or layout.dp * micro_batch
        out = (
            Training(shape, layout, device, framework, precision)
            .predict(TrainingPoint(seq_len, batch))
            .as_dict()
        )
        out |= {
            "kind": "training",
            "model": model_name,
            "gpu": gpu_name,
            "gpus": total,
            "global_batch": batch,
            "seq_len": seq_len,
        }
        keys = ("tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "fits")
    if as_json:
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    table = Table("", out["layout"], box=None)
    for key in keys:
        table.add_row(key, str(out[key]))
    for key, value in out["memory"].items():
        table.add_row(f"memory.{key}", str(value))
    console.print(table)
    if out.get("why"):
        console.print(f"[red]does not fit[/]: {out['why']}")


@click.command("disagg")
@_model_and_gpu
@click.option(
    "--framework",
    type=click.Choice(["vllm", "sglang", "trtllm"]),
    default="sglang",
    show_default=True,
)
@click.option(
    "--precision", type=click.Choice(["bf16", "fp8", "fp4"]), default="fp8", show_default=True
)
@click.option("--prefill-tp", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--prefill-ep", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--decode-tp", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--decode-dp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Decode DP (attention groups inside tp with --decode-dp-attention).",
)
@click.option("--decode-ep", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--decode-dp-attention", is_flag=True)
@_lengths(isl=4096, osl=1024)
@click.option(
    "--ttft-ms", type=click.FloatRange(min=0, min_open=True), required=True, help="TTFT SLO (p50)."
)
@click.option(
    "--tpot-ms", type=click.FloatRange(min=0, min_open=True), required=True, help="TPOT SLO (p50)."
)
@click.option("--json", "as_json", is_flag=True)
def disagg_cmd(
    model_name,
    gpu_name,
    framework,
    precision,
    prefill_tp,
    prefill_ep,
    decode_tp,
    decode_dp,
    decode_ep,
    decode_dp_attention,
    isl,
    osl,
    ttft_ms,
    tpot_ms,
    as_json,
) -> None:
    """The prefill:decode split that meets a TTFT and a TPOT SLO at the fewest GPUs."""
    from pocforge.plan import Device, Layout, Serving, Shape, ShapeError, plan_disaggregated

    facts = resolve_model(model_name)
    try:
        device = Device.of(gpu_name)
        shape = Shape(facts)
    except KeyError as exc:
        fail(f"--gpu: {exc.args[0]}")
    except ShapeError as exc:
        fail(f"--model {model_name}: {exc}; give a facts file with them")
    kv = "fp8" if precision in ("fp8", "fp4") else "bf16"
    prefill = Serving(shape, Layout(tp=prefill_tp, ep=prefill_ep), device, framework, precision, kv)
    decode_layout = Layout(
        tp=decode_tp, dp=decode_dp, ep=decode_ep, dp_attention=decode_dp_attention
    )
    decode = Serving(shape, decode_layout, device, framework, precision, kv)
    out = plan_disaggregated(prefill, decode, isl, osl, ttft_ms, tpot_ms).as_dict()
    out |= {
        "prefill_layout": prefill.layout.label(),
        "decode_layout": decode_layout.label(),
        "prefill_gpus": prefill.layout.gpus,
        "decode_gpus": decode_layout.gpus,
    }
    if as_json:
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    if out["why"]:
        fail(f"no split meets the SLOs: {out['why']}", code=1)
    console.print(
        f"{out['prefill_instances']} prefill ({out['prefill_layout']}) : {out['decode_instances']} "
        f"decode ({out['decode_layout']}) = {out['gpus']} GPUs; {out['output_tput_per_gpu']:.1f} "
        f"output tok/s/GPU; TTFT {out['ttft_ms']:.0f} ms, TPOT {out['tpot_ms']:.1f} ms "
        f"(decode batch {out['decode_batch']}); KV per request {out['kv_bytes_per_request'] / 1e6:.1f} MB "
        f"in {out['kv_transfer_ms']:.2f} ms"
    )
