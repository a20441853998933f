"""Server-side benchmark of a long run's metric history (issue 41's load target): the time of
``GET /api/v1/jobs/<id>/metrics?max_points=500`` on 60 metrics x 20,000 steps, and the
event pump's cost per step, each measured with and without the columnar chunks.

    JIGSAW_ENV=test DATABASE_URL=postgres://postgres@127.0.0.1:5432/<your db> \\
        .venv/bin/python scripts/bench_metric_series.py [--steps 20000] [--repeat 5]

It migrates the database DATABASE_URL names, stores the run the browser benchmark stores
(``tests/e2e/test_chart_benchmark.py``: 60 metrics, every step), prints median figures and
deletes what it created. Figures:
- previous: the computation the endpoint ran before the chunks (every step's JSON decoded and
  reshaped in Python, then ``selectors.downsample``), in process, no HTTP;
- cold: the endpoint on a run without chunks (stored before they existed): it decodes every
  step once and seals the chunks;
- warm: the endpoint with the chunks sealed, the current range holding 1 step, then full
  (999 steps in it: the most JSON a read decodes);
- ingest: ``engine_events_ingest`` of one metrics event (60 metrics) per call, per step, with
  sealing off and on (on: one step in ``CHUNK_STEPS`` seals the range just passed), and the
  time sealing one range takes (what that one step pays on top).
Not a test: it never runs in the suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from tenants.models import Role  # noqa: E402
from tenants.services import api_token_create, membership_add, tenant_create  # noqa: E402
from tests.e2e.charts import stored_run  # noqa: E402
from tests.e2e.test_chart_benchmark import metric_names, value_fn  # noqa: E402
from webapp import engine_gateway  # noqa: E402
from webapp.gc_tuning import freeze_startup_heap  # noqa: E402
from webapp.jobs import selectors  # noqa: E402
from webapp.jobs.models import EngineCursor, Job, JobMetrics, JobMetricsChunk, JobStatus  # noqa: E402
from webapp.jobs.services import engine_events  # noqa: E402


def previous_series(job: Job, max_points: int) -> dict[str, list[list[float]]]:
    series: dict[str, list[list[float]]] = {}
    for step, values in JobMetrics.objects.filter(job=job).order_by("step").values_list("step", "values"):
        for name, value in values.items():
            series.setdefault(name, []).append([float(step), float(value)])
    return {name: selectors.downsample(points, max_points) for name, points in series.items()}


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def median_ms(fn: Callable[[], Any], repeat: int) -> str:
    runs = [timed(fn) for _ in range(repeat)]
    return f"median {statistics.median(runs):.0f} ms (min {min(runs):.0f}, max {max(runs):.0f}, n={repeat})"


def ingest_per_step_ms(job: Job, steps: range, names: list[str], seq: int, engine_id: str) -> tuple[float, float]:
    times = []
    for i, step in enumerate(steps):
        values = {name: value_fn(k)(step) for k, name in enumerate(names)}
        event = engine_gateway.EngineEvent(
            seq=seq + i,
            pipeline_id=str(job.pk),
            kind=engine_gateway.EventKind.METRICS,
            sim_time_s=0.0,
            data={"step": step, "metrics": values},
        )
        times.append(
            timed(
                lambda e=event: engine_events.engine_events_ingest(engine_id=engine_id, events=[e], next_cursor=e.seq)
            )
        )
    return statistics.mean(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ingest-steps", type=int, default=1000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    slug = f"bench-metrics-{uuid.uuid4().hex[:8]}"
    user = get_user_model().objects.create_user(username=slug)
    tenant = tenant_create(slug=slug, name=slug)
    try:
        membership_add(tenant=tenant, user=user, role=Role.OWNER)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(tenant=tenant, user=user, name='b')[1]}")
        names = metric_names()
        started = time.perf_counter()
        job = Job.objects.get(
            pk=stored_run(
                tenant, "long-run", args.steps, {n: value_fn(k) for k, n in enumerate(names)}, status=JobStatus.RUNNING
            )
        )
        print(f"stored {len(names)} metrics x {args.steps} steps in {time.perf_counter() - started:.1f} s")
        url = f"/api/v1/jobs/{job.pk}/metrics?max_points=500"
        freeze_startup_heap()  # as the server does at start (webapp/asgi.py): no full GC passes over Django

        def fetch() -> None:
            response = client.get(url)
            assert response.status_code == 200, response.content
            response.content  # noqa: B018 (rendered: the JSON encoding is part of the request)

        print(f"previous computation (in process): {median_ms(lambda: previous_series(job, 500), 2)}")
        JobMetricsChunk.objects.filter(job=job).delete()
        print(f"endpoint, cold (no chunks; seals them): {timed(fetch):.0f} ms")
        print(f"endpoint, warm (current range: 1 step): {median_ms(fetch, args.repeat)}")

        job.current_step = args.steps
        job.save(update_fields=["current_step"])
        seq = 1
        chunk = engine_events.metric_series.CHUNK_STEPS
        first = args.steps + 1
        sealing = engine_events._EngineBatch.seal_passed_ranges
        engine_events._EngineBatch.seal_passed_ranges = lambda self: None  # type: ignore[method-assign]
        try:
            off = ingest_per_step_ms(job, range(first, first + args.ingest_steps), names, seq, slug)
        finally:
            engine_events._EngineBatch.seal_passed_ranges = sealing  # type: ignore[method-assign]
        seq += args.ingest_steps
        first += args.ingest_steps
        on = ingest_per_step_ms(job, range(first, first + args.ingest_steps), names, seq, slug)
        stored = JobMetrics.objects.filter(job=job, step__gt=args.steps).count()
        assert stored == 2 * args.ingest_steps, f"{stored} steps ingested of {2 * args.ingest_steps}"
        print(f"ingest per step, sealing off: mean {off[0]:.2f} ms, max {off[1]:.0f} ms (n={args.ingest_steps})")
        print(f"ingest per step, sealing on:  mean {on[0]:.2f} ms, max {on[1]:.0f} ms (n={args.ingest_steps})")
        last = first + args.ingest_steps - 1
        print(f"  (steps {first}..{last}: {last // chunk - (first - 1) // chunk} range(s) sealed)")
        seal = engine_events.metric_series.seal_chunks
        print(f"sealing one range ({chunk} steps): {median_ms(lambda: seal(job.pk, [first // chunk]), args.repeat)}")
        top = (last // chunk + 1) * chunk - 1  # fill the current range: the most JSON a read decodes
        rows = [
            JobMetrics(job=job, step=s, values={n: value_fn(k)(s) for k, n in enumerate(names)})
            for s in range(last + 1, top + 1)
        ]
        JobMetrics.objects.bulk_create(rows)
        print(f"endpoint, warm (current range: {chunk} steps): {median_ms(fetch, args.repeat)}")
    finally:
        Job.objects.filter(tenant=tenant).delete()
        EngineCursor.objects.filter(engine_id=slug).delete()
        tenant.delete()
        user.delete()


if __name__ == "__main__":
    main()
