"""``pocforge bench serve`` and ``model make-tiny``: outputs, one-line errors, failing servers."""

import json
import threading
import time

import jsonschema
import pytest
from click.testing import CliRunner

from benchmarks.scripted_server import running_instrument
from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.records import read_records
from pocforge.bench.sweep import run_sweep
from pocforge.cli.bench import bench
from pocforge.cli.model import model
from pocforge.frameworks.process import free_port

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_serve_writes_summary_records_and_table(instrument, tiny_dir, tmp_path, transport):
    """Both streaming transports give the same, complete result files."""
    out = tmp_path / "run"
    res = CliRunner().invoke(
        bench,
        [
            "serve",
            "--base-url",
            instrument,
            "--model",
            "instrument",
            "--tokenizer",
            str(tiny_dir),
            "--isl",
            "16",
            "--osl",
            "4",
            "--concurrency",
            "1,3",
            "--num-prompts",
            "6",
            "--repeats",
            "2",
            "--slo",
            "ttft_ms:p90:500",
            "--slo",
            "error_rate:mean:0.01",
            "--transport",
            transport,
            "--out",
            str(out),
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "serving sweep" in res.output and "c3" in res.output
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.validate(summary, json.loads((out / "summary.schema.json").read_text()))
    assert summary["status"] == "complete" and [p["id"] for p in summary["points"]] == ["c1", "c3"]
    assert set(summary["definitions"]) >= {"ttft_ms", "tpot_ms", "itl_ms", "goodput"}
    assert summary["definitions"]["interactivity"]["derived"] is True
    for p in summary["points"]:
        assert len(read_records(out / p["records_file"])) == 12
        agg = p["aggregate"]["ttft_ms"]["p50"]
        assert agg["n"] == 2 and agg["ci95_low"] <= agg["mean"] <= agg["ci95_high"]
        assert [v["verdict"] for v in p["verdicts"]] == ["pass", "pass"]
        assert p["repeats"][0]["server"]["delta"]["vllm:request_success_total"] == 6
    assert summary["best_passing_point"] == "c3"
    assert summary["environment"]["transport"] == transport


@pytest.mark.parametrize(
    "args, msg",
    [
        ([], "Missing option '--base-url'"),
        (["--concurrency", "2", "--rate", "1"], "exactly one of --concurrency"),
        (["--concurrency", "0"], "must be > 0"),
        (["--concurrency", "1.5"], "comma-separated list of integers"),
        (["--concurrency", "1", "--slo", "ttft_ms:p99"], "metric:statistic:threshold"),
        (["--concurrency", "1", "--isl", "normal:x:1"], "--isl"),
        (["--concurrency", "1", "--dataset", "sharegpt"], "--dataset-path"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args, msg, tiny_dir, tmp_path, instrument):
    base = [
        "serve",
        "--base-url",
        instrument,
        "--model",
        "instrument",
        "--tokenizer",
        str(tiny_dir),
        "--out",
        str(tmp_path / "o"),
        "--quiet",
    ]
    res = CliRunner().invoke(bench, base + args if args else ["serve"])
    assert res.exit_code == 2 and msg in res.output
    assert res.output.count("\n") == 1 and "Traceback" not in res.output


def test_unreachable_server_and_unknown_model_exit_2(tiny_dir, tmp_path, instrument):
    for url, name, msg in [
        (f"http://127.0.0.1:{free_port()}", "m", "cannot reach server"),
        (instrument, "nope", "is not served"),
    ]:
        res = CliRunner().invoke(
            bench,
            [
                "serve",
                "--base-url",
                url,
                "--model",
                name,
                "--tokenizer",
                str(tiny_dir),
                "--concurrency",
                "1",
                "--out",
                str(tmp_path),
            ],
        )
        assert res.exit_code == 2 and msg in res.output and res.output.count("\n") == 1


def test_errors_are_recorded_and_a_dead_server_fails_only_its_points(tiny_dir, tmp_path):
    """Point c1 completes; the server dies during c2 (failed); c3 finds it gone (failed)."""
    with running_instrument(20.0, 20.0) as url:
        cfg = SweepConfig(
            base_url=url,
            model="instrument",
            tokenizer=str(tiny_dir),
            dataset=DatasetConfig(isl="8", osl="20"),
            values=[1, 2, 3],
            num_prompts=12,
        )
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("s", run_sweep(cfg, tmp_path)))
        t.start()
        c2 = tmp_path / "requests-c2.jsonl"
        deadline = time.monotonic() + 60
        # The kill comes once c2 has a finished request on disk (each record is written as it
        # ends), not after a fixed wait: a loaded CI machine finished none of c2 in 0.6 s.
        while not (c2.exists() and any(r.success for r in read_records(c2))):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    t.join(60)
    s = result["s"]
    assert [p.status for p in s.points] == ["ok", "failed", "failed"]
    assert s.points[0].repeats[0].completed == 12
    assert "server died" in s.points[1].error and "cannot reach" in s.points[2].error
    recs = read_records(tmp_path / "requests-c2.jsonl")
    assert any(r.success for r in recs) and any(not r.success for r in recs)


def test_http_errors_count_in_error_rate(tiny_dir, tmp_path):
    with running_instrument(5.0, 5.0, fail_after=4) as url:
        cfg = SweepConfig(
            base_url=url,
            model="instrument",
            tokenizer=str(tiny_dir),
            dataset=DatasetConfig(isl="8", osl="2"),
            values=[1],
            num_prompts=10,
        )
        rep = run_sweep(cfg, tmp_path).points[0].repeats[0]
    assert (rep.status, rep.completed, rep.failed) == ("ok", 4, 6)
    assert rep.metrics["error_rate"] == pytest.approx(0.6)
    assert "HTTP 503" in rep.error


def test_make_tiny_cli(tmp_path):
    res = CliRunner().invoke(
        model, ["make-tiny", "--arch", "qwen-moe", "--out", str(tmp_path / "m")]
    )
    assert res.exit_code == 0 and (tmp_path / "m" / "model.safetensors").exists()
    bad = CliRunner().invoke(model, ["make-tiny", "--arch", "gpt", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and bad.output.count("\n") == 1
