"""Plotly figures of the dashboard, built from aggregates only (never raw records).

Each function returns a ``plotly.graph_objects.Figure``; :func:`to_json` turns it into the
JSON the template hands to ``Plotly.newPlot``. Colours are fixed per series so a run, its
baselines and competitors look the same in every chart. Their text is in the language of
``_`` (the dashboard's gettext, :func:`pocforge.report.i18n.gettext_for`; English by default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pocforge.report.i18n import gettext_for
from pocforge.results.compare import pareto_front
from pocforge.results.serving import interactivity, throughput_per_gpu
from pocforge.results.stage_schema import (
    CollectiveResult,
    KernelResults,
    ServingResult,
    TrainingResult,
)

OURS = "#c8102e"  # this run
PALETTE = ("#1f6feb", "#6e7781", "#8250df", "#1a7f37", "#bf8700", "#0a3069")
LAYOUT = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
    "height": 320,
    "font": {"family": "Helvetica, Arial, sans-serif", "size": 12},
    "legend": {"orientation": "h", "y": -0.2},
}
ENGLISH = gettext_for("en")


def to_json(fig: go.Figure) -> str:
    return fig.to_json(validate=False, pretty=False, engine="json")


def _layout(fig: go.Figure, title: str, **extra: Any) -> go.Figure:
    fig.update_layout(**{**LAYOUT, "title": {"text": title, "x": 0.01}, **extra})
    return fig


def pareto(
    result: ServingResult,
    gpus: int | None,
    others: Sequence[tuple[str, ServingResult, int | None]] = (),
    min_interactivity: float | None = None,
    slo_label: str | None = None,
    failing_points: Sequence[str] = (),
    _: Callable[[str], str] = ENGLISH,
    ours: str | None = None,
    title: str | None = None,
) -> go.Figure:
    """Throughput per GPU vs interactivity: this run's points and front (named ``ours``,
    default "this run"), others overlaid; ``title`` replaces the default title."""
    fig = go.Figure()
    series = [(ours or _("this run"), result, gpus, OURS)] + [
        (name, res, g, PALETTE[i % len(PALETTE)]) for i, (name, res, g) in enumerate(others)
    ]
    xs_all: list[float] = []
    for i, (name, res, g, color) in enumerate(series):
        pts = []
        for p in res.points:
            x, y = interactivity(p), throughput_per_gpu(p, g)
            if x is not None and y is not None and p.status != "failed":
                pts.append((x, y, p.id))
        if not pts:
            continue
        xs_all += [x for x, _, _ in pts]
        front = pareto_front([(x, y) for x, y, _ in pts])
        mine = i == 0
        symbols = ["x" if mine and pid in failing_points else "circle" for _, _, pid in pts]
        fig.add_trace(
            go.Scatter(
                x=[x for x, _, _ in pts],
                y=[y for _, y, _ in pts],
                mode="markers+text" if mine else "markers",
                text=[pid for _, _, pid in pts] if mine else None,
                textposition="top center",
                marker={"color": color, "size": 9 if mine else 7, "symbol": symbols},
                name=_("{name} points").format(name=name),
                legendgroup=name,
                showlegend=False,
                hovertemplate="%{text}<br>%{x:.1f} tok/s/user<br>%{y:.1f} tok/s/GPU<extra>"
                + name
                + "</extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in front],
                y=[y for _, y in front],
                mode="lines",
                line={
                    "color": color,
                    "width": 3 if mine else 2,
                    "dash": "solid" if mine else "dash",
                },
                name=name,
                legendgroup=name,
            )
        )
    if min_interactivity is not None and xs_all:
        right = max(max(xs_all) * 1.15, min_interactivity * 1.2)
        fig.add_vrect(
            x0=min_interactivity,
            x1=right,
            fillcolor="#2da44e",
            opacity=0.08,
            line_width=0,
            annotation_text=slo_label or _("SLO region"),
            annotation_position="top left",
        )
    return _layout(
        fig,
        title or _("Throughput vs interactivity — {workload}").format(workload=result.workload),
        xaxis={
            "title": {"text": _("interactivity (output tokens/s per user)")},
            "rangemode": "tozero",
        },
        yaxis={"title": {"text": _("output tokens/s per GPU")}, "rangemode": "tozero"},
    )


def latency_percentiles(result: ServingResult, _: Callable[[str], str] = ENGLISH) -> go.Figure:
    """TTFT, TPOT and ITL p50/p90/p99 per sweep point."""
    metrics = [
        m for m in ("ttft_ms", "tpot_ms", "itl_ms") if any(m in p.metrics for p in result.points)
    ]
    fig = make_subplots(
        rows=1,
        cols=max(1, len(metrics)),
        subplot_titles=[m.replace("_ms", "").upper() + " (ms)" for m in metrics],
    )
    ids = [p.id for p in result.points]
    for col, m in enumerate(metrics, 1):
        for k, stat in enumerate(("p50", "p90", "p99")):
            ys = [p.metrics.get(m, {}).get(stat) for p in result.points]
            if all(y is None for y in ys):
                continue
            fig.add_trace(
                go.Scatter(
                    x=ids,
                    y=ys,
                    mode="lines+markers",
                    name=stat,
                    legendgroup=stat,
                    showlegend=col == 1,
                    line={"color": (OURS, PALETTE[0], PALETTE[2])[k]},
                ),
                row=1,
                col=col,
            )
    return _layout(
        fig, _("Latency percentiles per sweep point — {workload}").format(workload=result.workload)
    )


def ttft_split(
    rows: Sequence[dict[str, Any]], workload: str, _: Callable[[str], str] = ENGLISH
) -> go.Figure:
    """Per sweep point, the P/D router's two steps of TTFT stacked (the prefill, then the
    KV transfer and the first decode step; means over the requests) beside the client's
    mean TTFT (:func:`pocforge.report.disagg.rows`)."""
    ids = [r["id"] for r in rows]
    fig = go.Figure()
    for key, name, color in (
        ("prefill_ms", _("prefill (router)"), PALETTE[0]),
        ("transfer_decode_ms", _("KV transfer + first decode step (router)"), PALETTE[2]),
    ):
        if any(r[key] is not None for r in rows):
            fig.add_trace(go.Bar(x=ids, y=[r[key] for r in rows], name=name, marker_color=color))
    if any(r["ttft_mean"] is not None for r in rows):
        fig.add_trace(
            go.Scatter(
                x=ids,
                y=[r["ttft_mean"] for r in rows],
                mode="markers",
                marker={"color": OURS, "size": 12, "symbol": "diamond"},
                name=_("client TTFT (mean)"),
            )
        )
    return _layout(
        fig,
        _("TTFT split per sweep point — {workload}").format(workload=workload),
        barmode="stack",
        xaxis={"title": {"text": _("sweep point")}, "type": "category"},
        yaxis={"title": {"text": _("mean time (ms)")}, "rangemode": "tozero"},
    )


def ttft_by_turn(
    rows: Sequence[dict[str, Any]], workload: str, _: Callable[[str], str] = ENGLISH
) -> go.Figure:
    """Per sweep point, the TTFT of the first turn beside that of the later turns, p50 and
    p90 (:func:`pocforge.report.kv_reuse.rows`)."""
    ids = [r["id"] for r in rows]
    fig = go.Figure()
    for metric, name, color in (
        ("ttft_first_turn_ms", _("first turn"), OURS),
        ("ttft_later_turns_ms", _("later turns"), PALETTE[0]),
    ):
        for stat, opacity in (("p50", 1.0), ("p90", 0.45)):
            ys = [r["turns"][metric][stat] for r in rows]
            if all(y is None for y in ys):
                continue
            fig.add_trace(
                go.Bar(
                    x=ids,
                    y=ys,
                    name=f"{name} {stat}",
                    marker={"color": color, "opacity": opacity},
                )
            )
    return _layout(
        fig,
        _("TTFT of the first turn vs the later turns — {workload}").format(workload=workload),
        barmode="group",
        xaxis={"title": {"text": _("sweep point")}, "type": "category"},
        yaxis={"title": {"text": "TTFT (ms)"}, "rangemode": "tozero"},
    )


def loss_curve(result: TrainingResult, _: Callable[[str], str] = ENGLISH) -> go.Figure:
    fig = go.Figure(
        go.Scatter(
            x=[s.step for s in result.steps],
            y=[s.loss for s in result.steps],
            mode="lines+markers",
            line={"color": OURS},
            name=_("loss"),
        )
    )
    if result.warmup_steps:
        fig.add_vrect(
            x0=0,
            x1=result.warmup_steps,
            fillcolor="#6e7781",
            opacity=0.1,
            line_width=0,
            annotation_text=_("warm-up"),
            annotation_position="top left",
        )
    return _layout(
        fig,
        _("Training loss"),
        xaxis={"title": {"text": _("step")}},
        yaxis={"title": {"text": _("loss (nats)")}},
    )


def kernel_bars(result: KernelResults, _: Callable[[str], str] = ENGLISH) -> go.Figure:
    labels = [
        f"{r.op} {r.dtype} " + "x".join(str(v) for v in r.shape.values()) for r in result.rows
    ]
    # a literal % is written %% and formatted away: gettext reads "% o…" as a placeholder
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=[_("%% of roofline") % {}, _("speedup vs torch reference")]
    )
    fig.add_trace(
        go.Bar(
            x=[r.pct_roofline for r in result.rows],
            y=labels,
            orientation="h",
            marker_color=OURS,
            name=_("%% roofline") % {},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=[r.speedup_vs_reference for r in result.rows],
            y=labels,
            orientation="h",
            marker_color=PALETTE[0],
            name=_("speedup"),
        ),
        row=1,
        col=2,
    )
    fig.update_yaxes(showticklabels=False, row=1, col=2)
    return _layout(fig, _("Kernels"), showlegend=False, height=max(300, 40 + 28 * len(labels)))


def collective_curves(
    results: Sequence[CollectiveResult], _: Callable[[str], str] = ENGLISH
) -> go.Figure:
    fig = go.Figure()
    for i, r in enumerate(results):
        color = OURS if i == 0 else PALETTE[(i - 1) % len(PALETTE)]
        name = (
            _("{collective} ({ranks} ranks, {nodes} node)")
            if r.nodes == 1
            else _("{collective} ({ranks} ranks, {nodes} nodes)")
        )
        fig.add_trace(
            go.Scatter(
                x=[row.bytes for row in r.rows],
                y=[row.busbw_gbs for row in r.rows],
                mode="lines+markers",
                name=name.format(collective=r.collective, ranks=r.ranks, nodes=r.nodes),
                line={"color": color},
            )
        )
    return _layout(
        fig,
        _("Collective bus bandwidth"),
        xaxis={"type": "log", "title": {"text": _("message size (bytes)")}},
        yaxis={"title": {"text": _("bus bandwidth (GB/s)")}},
    )


def power_timeline(
    curves: dict[str, Any], workload: str, _: Callable[[str], str] = ENGLISH
) -> go.Figure:
    """Power, utilisation and latency of a workload (or step times of a training run) over
    its time, one row each where measured (:func:`pocforge.report.watts.timeline`,
    :func:`~pocforge.report.watts.training_timeline`), the points' windows shaded."""
    rows = [
        (key, title)
        for key, title in (
            ("power", _("power (W)")),
            ("util", _("utilization (%%)") % {}),
            ("links", _("link traffic (GB/s)")),
            ("latency", _("latency (ms)")),
            ("steps", _("step time (s)")),
        )
        if curves.get(key)
    ]
    fig = make_subplots(rows=max(1, len(rows)), cols=1, shared_xaxes=True, vertical_spacing=0.06)
    colors = iter((OURS, *PALETTE, *PALETTE))
    for row, (key, title) in enumerate(rows, 1):
        # a request now and then (low load) makes isolated bins: latency gets markers, and
        # each step is a point of its own
        mode = "lines" if key in ("power", "util", "links") else "lines+markers"
        for name, (xs, ys) in curves[key].items():
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode=mode,
                    name=name,
                    line={"color": next(colors)},
                    marker={"size": 4},
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title={"text": title}, rangemode="tozero", row=row, col=1)
    labelled: set[str] = set()
    for point, start, end in curves.get("windows") or []:
        fig.add_vrect(
            x0=start, x1=end, fillcolor=PALETTE[0], opacity=0.08, line_width=0, row="all", col=1
        )
        if point not in labelled:  # a point's first window carries its name
            labelled.add(point)
            fig.add_annotation(
                x=start, y=1, xref="x", yref="paper", text=point, showarrow=False, xanchor="left"
            )
    fig.update_xaxes(title={"text": _("seconds from the first sample")}, row=len(rows), col=1)
    return _layout(
        fig,
        _("Power and utilization over time — {workload}").format(workload=workload),
        height=160 + 170 * len(rows),
    )
