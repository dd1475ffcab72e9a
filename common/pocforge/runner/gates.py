"""The serving stage's correctness gates, run against the live deployment.

- before the sweeps, :func:`sanity_gate` (``serving/sanity.json``): a failure stops the
  stage before any timing is spent;
- after the sweeps, on the same server, :func:`accuracy_tasks`
  (``serving/_accuracy/<name>/``) and :func:`parity_candidate` (``serving/_parity/``: the
  POC's configuration answering the parity prompts);
- the ``parity`` stage (:func:`run_parity_stage`) then starts the baseline — the same
  deployment with the framework's own kernels and without the POC's framework patches —
  answers the same prompts and compares (``parity/result.json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pocforge import atomic
from pocforge.frameworks.base import controller_model
from pocforge.quality.accuracy import AccuracyError, run_task
from pocforge.quality.completions import Completion, CompletionError
from pocforge.quality.parity import bisect, bounds, collect, compare, meets
from pocforge.quality.sanity import run_sanity
from pocforge.spec import PocSpec

Say = Callable[[str], None]
ACCURACY = "_accuracy"  # under serving/; "_": never a workload's folder
CANDIDATE = Path("_parity") / "candidate.json"  # "_": never a workload's folder


class GateError(RuntimeError):
    """A gate that stops its stage (one clear line)."""


def served_model(spec: PocSpec) -> str:
    return spec.model.served_name or spec.model.id


def sanity_gate(spec: PocSpec, base_url: str, stage_dir: Path, say: Say) -> None:
    gate = spec.serving.sanity
    if not gate.enabled:
        return
    try:
        result = run_sanity(base_url, served_model(spec), gate)
    except CompletionError as exc:
        raise GateError(f"sanity gate: the server did not answer: {exc}") from None
    atomic.write_text(stage_dir / "sanity.json", result.model_dump_json(indent=2))
    if not result.passed:
        raise GateError(
            f"sanity gate failed before any sweep ({len(result.problems)} problems): "
            + "; ".join(result.problems[:3])
            + f" (all answers in {stage_dir / 'sanity.json'})"
        )
    say(f"serving: sanity gate passed ({len(result.answers)} prompts)")


def accuracy_tasks(spec: PocSpec, base_url: str, stage_dir: Path, say: Say) -> None:
    """Every accuracy task; an infrastructure failure is written as ``error.json`` (the
    criteria on it are inconclusive, never failed) and the next task runs."""
    for task in spec.serving.accuracy:
        out = stage_dir / ACCURACY / task.name
        say(f"serving: accuracy task {task.name} (lm-eval {task.task or task.name})")
        try:
            result = run_task(
                task, base_url, served_model(spec), controller_model(spec), out, spec.source_dir
            )
        except AccuracyError as exc:
            out.mkdir(parents=True, exist_ok=True)
            atomic.write_text(
                out / "error.json", json.dumps({"task": task.name, "error": str(exc)}, indent=2)
            )
            say(f"serving: accuracy task {task.name} not evaluated: {exc}")
            continue
        scores = ", ".join(
            f"{name} {score.value:.3f}" + (f" ± {score.stderr:.3f}" if score.stderr else "")
            for name, score in result.metrics.items()
        )
        say(f"serving: accuracy {task.name}: {scores} ({result.samples} samples)")


def parity_candidate(spec: PocSpec, base_url: str, stage_dir: Path, say: Say) -> None:
    gate = spec.serving.parity
    if gate is None:
        return
    answers = collect(base_url, served_model(spec), gate)
    path = stage_dir / CANDIDATE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps([a.model_dump() for a in answers], indent=2))
    say(f"serving: parity prompts answered by the POC's configuration ({len(answers)})")


def describe(spec: PocSpec) -> str:
    serving = spec.serving
    kernels = ", ".join(serving.kernels) if serving.kernels else "none"
    return f"{serving.framework} {serving.version or ''} with kit kernels: {kernels}".replace(
        "  ", " "
    )


def with_kernels(spec: PocSpec, kernels: list[str]) -> PocSpec:
    """The same deployment with only these kit kernels (the rest the framework's own)."""
    serving = spec.serving.model_copy(update={"kernels": list(kernels)})
    return spec.model_copy(update={"serving": serving})


def baseline_spec(spec: PocSpec) -> PocSpec:
    """The same deployment with the framework's own kernels (no kit kernels)."""
    return with_kernels(spec, [])


def run_parity_stage(
    spec: PocSpec,
    stage_dir: Path,
    say: Say,
    serve: Callable[[PocSpec, Path], object],
    notes: list[str] | None = None,
) -> None:
    """Start the baseline (``serve(spec, log_dir)``: a context manager yielding its base URL
    and process), answer the parity prompts, compare with the candidate's answers.
    ``notes``: how the baseline was made (its framework patches), kept in the result."""
    gate = spec.serving.parity
    candidate_file = stage_dir.parent / "serving" / CANDIDATE
    if not candidate_file.is_file():
        raise GateError(
            f"parity: the serving stage left no candidate answers ({candidate_file}); run it first"
        )
    candidate = [Completion.model_validate(c) for c in json.loads(candidate_file.read_text())]
    baseline = baseline_spec(spec)
    say(f"parity: starting the baseline ({describe(baseline)})")
    with serve(baseline, stage_dir) as (base_url, _server):
        answers = collect(base_url, served_model(spec), gate)
    atomic.write_text(
        stage_dir / "baseline.json", json.dumps([a.model_dump() for a in answers], indent=2)
    )
    result = compare(answers, candidate, gate, describe(baseline), describe(spec), notes or ())
    limits = bounds(spec.acceptance.criteria)
    if gate.bisect and len(spec.serving.kernels) > 1 and not meets(result, limits):
        _bisect_kernels(spec, answers, limits, result, stage_dir, serve, say)
    atomic.write_text(stage_dir / "result.json", result.model_dump_json(indent=2))
    say(
        f"parity: {result.token_agreement:.0%} identical continuations, max |Δ log p| "
        + (f"{result.max_logprob_diff:.4f}" if result.max_logprob_diff is not None else "n/a")
        + (
            f", first divergence at token {result.first_divergence}"
            if result.first_divergence is not None
            else ""
        )
    )


def _bisect_kernels(spec, answers, limits, result, stage_dir: Path, serve, say: Say) -> None:
    """Name the kit kernels at fault (``result.culprits``): each trial serves the baseline
    with a subset of them (``parity/bisect/<kernels>/``) against the baseline's answers."""
    gate, kernels = spec.serving.parity, list(spec.serving.kernels)
    say(f"parity: the kit's kernels together fail it; bisecting {', '.join(kernels)}")

    def fails(subset: list[str]) -> bool:
        variant = with_kernels(spec, subset)
        label, folder = ",".join(subset), stage_dir / "bisect" / ",".join(subset)
        folder.mkdir(parents=True, exist_ok=True)
        with serve(variant, folder) as (base_url, _server):
            answered = collect(base_url, served_model(spec), gate)
        tried = compare(answers, answered, gate, result.baseline, describe(variant))
        atomic.write_text(folder / "result.json", tried.model_dump_json(indent=2))
        ok = meets(tried, limits)
        result.trials[label] = {
            "token_agreement": tried.token_agreement,
            "max_logprob_diff": tried.max_logprob_diff,
            "meets_criteria": ok,
        }
        verdict = "within" if ok else "outside"
        say(f"parity: {label} alone: {tried.token_agreement:.0%} identical, {verdict} the criteria")
        return not ok

    result.culprits = bisect(kernels, fails)
    if result.culprits:
        say(f"parity: at fault: {', '.join(result.culprits)}")
        return
    result.notes.append(
        f"bisection: {kernels[0]} alone meets the criteria against the baseline; the "
        "failure comes from the POC's framework patches"
        if len(kernels) == 1
        else "bisection: each half of the kit's kernels meets the criteria against the "
        "baseline; the failure comes from them all together or from the POC's framework patches"
    )
    say(f"parity: {result.notes[-1]}")
