"""The cluster timeline picture: a real PNG of a simulated run, shared devices stacked, crops."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from jigsaw_engine.bench.timeline_plot import write_timeline_png
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.run_record import TimelineSpan
from tests.engine.builders import make_cluster, make_cost, make_spec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_rgb(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == PNG_MAGIC
    return np.asarray(matplotlib.image.imread(path))[:, :, :3]


def count_colour(image: np.ndarray, colour: str) -> int:
    return int(np.all(np.abs(image - np.array(to_rgb(colour))) < 0.01, axis=2).sum())


def span(pid: str, devices: tuple[int, ...], start_s: float, end_s: float, share: float = 1.0) -> TimelineSpan:
    # Dense decode: drawn without a hatch, so a bar's pixels are its pipeline's colour.
    return TimelineSpan(pid, "decode", "dense", 0, 0, devices, start_s, end_s, share)


def test_simulated_run_gives_a_wide_non_blank_png(tmp_path: Path) -> None:
    c = ClusterController(make_cluster(4), make_cost())
    c.submit("a", make_spec(workload="math"))
    c.submit("b", make_spec(workload="search"))
    c.run_until_idle()
    assert {s.kind for s in c.timeline} >= {"decode", "train", "weight_sync"}
    out = tmp_path / "timeline.png"
    write_timeline_png(c.timeline, 4, out, title="two pipelines", pipeline_names={"a": "math", "b": "search"})
    image = read_rgb(out)
    height, width = image.shape[:2]
    assert width == 14 * 120 and width > 2 * height
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 20
    assert count_colour(image, "tab:blue") > 1000 and count_colour(image, "tab:orange") > 1000


def test_co_running_shares_are_stacked_not_overlapped(tmp_path: Path) -> None:
    # 0.3 and 0.7 of device 0 over the same seconds: both visible, in proportion.
    spans = [span("a", (0,), 0.0, 10.0, 0.3), span("b", (0,), 0.0, 10.0, 0.7)]
    out = tmp_path / "shared.png"
    write_timeline_png(spans, 2, out, title="shared")
    image = read_rgb(out)
    blue, orange = count_colour(image, "tab:blue"), count_colour(image, "tab:orange")
    assert blue > 1000 and orange > 1000
    assert 0.35 < blue / orange < 0.5  # 0.3 / 0.7 = 0.43


def test_host_spans_are_skipped_and_max_time_crops(tmp_path: Path) -> None:
    host = TimelineSpan("h", "reward", None, 0, None, (), 0.0, 5.0, 1.0)
    late = span("late", (1,), 50.0, 60.0)
    out = tmp_path / "cropped.png"
    write_timeline_png([host, span("a", (0,), 0.0, 20.0), late], 2, out, title="cropped", max_time_s=30.0)
    image = read_rgb(out)
    assert count_colour(image, "tab:blue") > 1000  # "a" is the only pipeline drawn
    assert count_colour(image, "tab:orange") == 0


def test_span_on_a_missing_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="device 3"):
        write_timeline_png([span("a", (3,), 0.0, 1.0)], 2, tmp_path / "x.png", title="bad")


def test_missing_matplotlib_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(RuntimeError, match=r"pip install 'jigsawrl\[plot\]'"):
        write_timeline_png([], 1, tmp_path / "x.png", title="none")
