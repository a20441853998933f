"""The metric history read from columnar chunks answers exactly what decoding every step's
JSON answered (same series, same downsampled points), picks up a step stored a moment ago,
and follows its job when it is deleted or cloned; the event pump seals the ranges a job
moves past."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.e2e.charts import stored_run
from webapp import engine_gateway
from webapp.jobs import metric_series, selectors
from webapp.jobs.models import Job, JobMetrics, JobMetricsChunk, JobStatus
from webapp.jobs.services import engine_events
from webapp.jobs.services.deletion import job_delete
from webapp.jobs.services.lifecycle import job_transition
from webapp.jobs.services.submit import job_clone

pytestmark = pytest.mark.django_db(transaction=True)

CHUNK = metric_series.CHUNK_STEPS


def previous_series(job: Job, names: list[str] | None = None, max_points: int | None = None) -> dict[str, Any]:
    """The endpoint's computation before the chunks: every step's JSON reshaped in Python."""
    series: dict[str, list[list[float]]] = {}
    for step, values in JobMetrics.objects.filter(job=job).order_by("step").values_list("step", "values"):
        for name, value in values.items():
            if names is None or name in names:
                series.setdefault(name, []).append([float(step), float(value)])
    if max_points is not None:
        series = {name: selectors.downsample(points, max_points) for name, points in series.items()}
    return series


def fetched(job: Job, names: list[str] | None = None, max_points: int | None = None) -> list[tuple[str, Any]]:
    return list(selectors.job_metric_series(job=job, names=names, max_points=max_points).items())


def expected(job: Job, names: list[str] | None = None, max_points: int | None = None) -> list[tuple[str, Any]]:
    return list(previous_series(job, names, max_points).items())


def mixed_run(tenant: Any, steps: int) -> Job:
    """Metrics as real runs report them: some every step (ints and floats, spikes), validation
    every 10th step, one that starts half-way; the ranges it moved past sealed, as the pump does."""
    job = Job.objects.get(pk=stored_run(tenant, "mixed", steps, {}, status=JobStatus.RUNNING))
    JobMetrics.objects.filter(job=job).delete()  # the job as stored; these rows instead
    rows = []
    for step in range(1, steps + 1):
        values: dict[str, float] = {"critic/score": (step * 7919 % 1000) / 7 + (50.0 if step % 97 == 0 else 0.0)}
        values["len"] = step % 13
        if step % 10 == 0:
            values["val-core/acc"] = step / 3
        if step > steps // 2:
            values["actor/kl"] = 1 / step
        rows.append(JobMetrics(job=job, step=step, values=values))
    JobMetrics.objects.bulk_create(rows)
    metric_series.seal_chunks(job.pk, range(steps // CHUNK))
    job.current_step = steps
    job.save(update_fields=["current_step"])
    return job


def ingest(job: Job, steps: range, seq: int) -> None:
    """Steps reported by the engine, stored by the event pump."""
    events = [
        engine_gateway.EngineEvent(
            seq=seq + i,
            pipeline_id=str(job.pk),
            kind=engine_gateway.EventKind.METRICS,
            sim_time_s=0.0,
            data={"step": step, "metrics": {"critic/score": step * 0.5, "len": step % 13}},
        )
        for i, step in enumerate(steps)
    ]
    engine_events.engine_events_ingest(engine_id="metric-series-test", events=events, next_cursor=seq + len(events))


def test_same_series_and_points_as_decoding_every_step(make_actor) -> None:
    job = mixed_run(make_actor("acme").tenant, 2 * CHUNK + CHUNK // 2)
    assert sorted(JobMetricsChunk.objects.filter(job=job).values_list("chunk", flat=True)) == [0, 1]
    for max_points in (None, 3, 7, 300, 1000, 5000):
        assert fetched(job, max_points=max_points) == expected(job, max_points=max_points)
    assert fetched(job, ["actor/kl", "len"], 300) == expected(job, ["actor/kl", "len"], 300)
    # A chunk built by the read itself (none sealed yet) answers the same.
    JobMetricsChunk.objects.filter(job=job).delete()
    assert fetched(job, max_points=300) == expected(job, max_points=300)
    assert JobMetricsChunk.objects.filter(job=job).count() == 2


def test_a_step_stored_a_moment_ago_is_in_the_next_fetch(make_actor) -> None:
    job = mixed_run(make_actor("acme").tenant, CHUNK + 10)
    assert fetched(job, max_points=500) == expected(job, max_points=500)
    ingest(job, range(CHUNK + 11, 2 * CHUNK + 5), seq=1)  # moves past a range: the pump seals it
    assert JobMetricsChunk.objects.filter(job=job, chunk=1).values_list("rows", flat=True).get() == CHUNK
    series = dict(fetched(job, max_points=500))
    assert series["critic/score"][-1] == [2 * CHUNK + 4, (2 * CHUNK + 4) * 0.5]
    assert list(series.items()) == expected(job, max_points=500)
    ingest(job, range(2 * CHUNK + 5, 2 * CHUNK + 6), seq=10_000)
    assert dict(fetched(job))["len"][-1] == [2 * CHUNK + 5, (2 * CHUNK + 5) % 13]
    # A late step inside a sealed range (a gap filled) makes that chunk stale: rebuilt, not missed.
    JobMetrics.objects.filter(job=job, step=CHUNK + CHUNK // 2).delete()
    JobMetricsChunk.objects.filter(job=job, chunk=1).delete()
    metric_series.seal_chunks(job.pk, [1])
    JobMetrics.objects.create(job=job, step=CHUNK + CHUNK // 2, values={"critic/score": -1.0})
    assert [CHUNK + CHUNK // 2, -1.0] in dict(fetched(job))["critic/score"]
    assert fetched(job, max_points=500) == expected(job, max_points=500)


def test_history_follows_its_job_when_deleted_or_cloned(make_actor) -> None:
    actor = make_actor("acme")
    job = mixed_run(actor.tenant, CHUNK + 50)
    job_transition(job_id=job.pk, to=JobStatus.CANCELLED, reason="cancelled by test")
    clone = job_clone(job=Job.objects.get(pk=job.pk), user=actor.user, checkpoint_step=0, overrides={})
    assert fetched(clone, max_points=500) == []  # a clone trains afresh: its own history, empty
    ingest(clone, range(1, 4), seq=1)
    assert dict(fetched(clone))["critic/score"] == [[1.0, 0.5], [2.0, 1.0], [3.0, 1.5]]
    assert fetched(job, max_points=500) == expected(job, max_points=500)  # the source's is unchanged
    job_delete(job=Job.objects.get(pk=job.pk), actor=actor.user)
    assert not JobMetricsChunk.objects.filter(job_id=job.pk).exists()


def wave(k: int) -> Any:
    return lambda s: k + ((s * 7919 + k * 104729) % 1000) / 5000


def test_a_long_run_reads_its_sealed_chunks(make_actor) -> None:
    """20,000 steps: the same points as before, and a second read writes nothing and decodes
    only the current range's JSON."""
    steps, sealed = 20_037, 20_037 // CHUNK
    job = Job.objects.get(
        pk=stored_run(
            make_actor("acme").tenant,
            "long",
            steps,
            {f"m{k}": wave(k) for k in range(3)},
        )
    )
    assert JobMetricsChunk.objects.filter(job=job).count() == sealed
    before = expected(job, max_points=500)
    with CaptureQueriesContext(connection) as queries:
        assert fetched(job, max_points=500) == before
    reads = [q["sql"] for q in queries.captured_queries]
    assert not any(q.startswith(("INSERT", "UPDATE")) for q in reads)
    decoded = [q for q in reads if '"values"' in q and 'jobmetrics"' in q.lower()]
    assert len(decoded) == 1 and f">= {sealed * CHUNK}" in decoded[0] and f"< {(sealed + 1) * CHUNK}" in decoded[0]
