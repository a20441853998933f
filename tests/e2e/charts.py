"""Helpers for the browser tests of the metric charts: stored runs with chosen metrics, and
what a uPlot chart's canvas shows (its pixels; a canvas has no DOM to query)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs import metric_series
from webapp.jobs.models import EngineMode, Job, JobMetrics, JobStatus

MetricFn = Callable[[int], float]


def stored_run(
    tenant: Any,
    name: str,
    steps: int,
    metrics: Mapping[str, MetricFn],
    *,
    status: str = JobStatus.SUCCEEDED,
    batch: int = 2000,
) -> str:
    """A run as the service stores one, with ``metrics[name](step)`` at every step 1..steps
    and the columnar chunks of the step ranges it moved past (training one would take minutes;
    the engine tests cover what real runs report)."""
    spec = make_spec(trainer={"total_steps": steps})
    job = Job.objects.create(
        tenant=tenant,
        name=name,
        spec=spec,
        resolved_spec=engine_gateway.resolve_spec(spec),
        num_gpus=1,
        total_steps=steps,
        current_step=steps if status == JobStatus.SUCCEEDED else 0,
        status=status,
        engine_mode=EngineMode.SIMULATED,
    )
    rows = [
        JobMetrics(job=job, step=step, values={m: fn(step) for m, fn in metrics.items()})
        for step in range(1, steps + 1)
    ]
    JobMetrics.objects.bulk_create(rows, batch_size=batch)
    metric_series.seal_chunks(job.pk, range(steps // metric_series.CHUNK_STEPS))  # as the event pump does
    return str(job.pk)


def hex_rgb(colour: str) -> tuple[int, int, int]:
    c = colour.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def colour_pixels(page: Any, chart_test_id: str, colours: list[str], tolerance: int = 40) -> list[int]:
    """How many opaque pixels of the chart's canvas are each colour (within ``tolerance`` per
    channel): a line drawn in that colour shows as tens of pixels at least."""
    return list(
        page.evaluate(
            """([id, rgbs, tol]) => {
                const canvas = document.querySelector(`[data-testid="${id}"] canvas`);
                const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
                const counts = rgbs.map(() => 0);
                for (let i = 0; i < d.length; i += 4) {
                    if (d[i + 3] < 200) continue;
                    rgbs.forEach(([r, g, b], k) => {
                        if (Math.abs(d[i] - r) <= tol && Math.abs(d[i + 1] - g) <= tol && Math.abs(d[i + 2] - b) <= tol)
                            counts[k]++;
                    });
                }
                return counts;
            }""",
            [chart_test_id, [hex_rgb(c) for c in colours], tolerance],
        )
    )


def canvas_image(page: Any, chart_test_id: str) -> str:
    """The chart's drawing as a data URL: equal strings, the same picture."""
    return str(page.evaluate("id => document.querySelector(`[data-testid='${id}'] canvas`).toDataURL()", chart_test_id))


def hover(page: Any, chart_test_id: str, fraction: float) -> None:
    """Move the mouse over the chart's plot area, ``fraction`` of its width from the left."""
    box = page.locator(f"[data-testid='{chart_test_id}'] .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)


def drag(page: Any, chart_test_id: str, start: float, end: float) -> None:
    """Drag across the chart's plot area from ``start`` to ``end`` (fractions of its width)."""
    box = page.locator(f"[data-testid='{chart_test_id}'] .u-over").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (start + end) / 2, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * end, y, steps=4)
    page.mouse.up()


def readout(page: Any, chart_test_id: str) -> str:
    return str(page.locator(f"[data-testid='{chart_test_id}'] [data-testid=chart-readout]").inner_text()).strip()
