"""The planner against published measurements: the points are well-formed, the summary
counts only held-out points, and the committed accuracy page is what the code produces."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from pocforge.catalog import catalog_entry, gpu
from pocforge.plan import accuracy
from pocforge.plan.accuracy import Replay

from ..conftest import REPO

POINTS_FILE = REPO / "docs" / "planner-points.yaml"
PAGE = REPO / "docs" / "planner-accuracy.md"
POINTS = accuracy.load_points(POINTS_FILE)


def test_the_accuracy_page_is_what_the_code_produces():
    """docs/planner-accuracy.md is committed and equals `python -m pocforge.plan.accuracy`
    (regenerate it with `make planner-accuracy` after changing the planner or the points)."""
    assert PAGE.is_file(), f"{PAGE.relative_to(REPO)} is missing: run `make planner-accuracy`"
    page = accuracy.markdown([accuracy.replay(p) for p in POINTS])
    assert PAGE.read_text() == page, "stale: run `make planner-accuracy`"


@pytest.mark.parametrize("point", POINTS, ids=[p["id"] for p in POINTS])
def test_every_point_names_a_known_model_and_gpu_and_its_source(point):
    """Each point's model and GPU are in the catalog, its source is an https URL, and its
    quote and measured value are there."""
    catalog_entry(point["model"])
    gpu(point["gpu"])
    url = urlparse(point["source"])
    assert url.scheme == "https" and url.netloc, point["source"]
    assert point["quote"].strip()
    metric = "tokens_per_s_per_gpu" if point["kind"] == "training" else "output_tput_per_gpu"
    assert point["measured"][metric] > 0


def test_point_ids_are_unique():
    ids = [p["id"] for p in POINTS]
    assert len(ids) == len(set(ids))


def test_calibrated_points_exist():
    """Every point calibration.yaml says a number was fitted to is in the points file."""
    ids = {p["id"] for p in POINTS}
    assert set(accuracy.calibrated_on()) <= ids


def test_calibration_points_are_reproduced():
    """Each number's own calibration points replay within 10% (refit with --fit when the
    model changes)."""
    fitted = [accuracy.replay(p) for p in POINTS if p["id"] in accuracy.calibrated_on()]
    assert fitted
    for r in fitted:
        assert r.calibrates and abs(r.error) < 0.10, (r.id, r.error)


def _replay(id: str, error: float | None, calibrates: str | None = None) -> Replay:
    predicted = None if error is None else 100 * (1 + error)
    return Replay(id, "serving", "H100", "m", "output_tput_per_gpu", 100.0, predicted, calibrates)


def test_summary_counts_held_out_points_only():
    """Median and worst are over held-out points: a calibration point's error and a point
    without a prediction change neither."""
    replays = [
        _replay("a", 0.10),
        _replay("b", -0.30),
        _replay("c", 0.20),
        _replay("fit", 5.0, calibrates="serving.decode_efficiency"),
        _replay("skipped", None),
    ]
    s = accuracy.summary(replays)
    assert s["points"] == 5
    assert s["held_out"] == 3 and s["calibration_points"] == 1
    assert s["median_abs_error"] == pytest.approx(0.20)
    assert s["worst_abs_error"] == pytest.approx(0.30)


def test_summary_of_the_published_points():
    """On the real points, the held-out count is the replayed points no number was fitted
    to, and the worst error is at least the median."""
    replays = [accuracy.replay(p) for p in POINTS]
    s = accuracy.summary(replays)
    held_out = [r for r in replays if r.predicted is not None and r.calibrates is None]
    assert s["held_out"] == len(held_out) > 0
    assert s["calibration_points"] == len(accuracy.calibrated_on())
    assert 0 <= s["median_abs_error"] <= s["worst_abs_error"]
    assert all(r.skipped for r in replays if r.predicted is None)
