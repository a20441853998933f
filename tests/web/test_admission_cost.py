"""What an admission pass costs as the queue grows: it writes only for jobs whose decision or
reason changed, so a long queue behind a full cluster costs reads, not a write per job. The
reasons every waiting job shows stay right as capacity comes and goes."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants.models import Quota
from tests.engine.builders import make_spec
from tests.web.admission_pass import pass_held_mid_decision
from webapp.jobs import admission
from webapp.jobs.models import Job, JobEvent, JobStatus
from webapp.jobs.services import lifecycle
from webapp.jobs.services.submit import job_submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def eight_h100(settings: Any) -> None:
    settings.ENGINE_CLUSTER = {"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"}


def submit(actor: Any, gpus: int, name: str = "j") -> Job:
    spec = make_spec(name=name, resources={"num_gpus": gpus})
    return job_submit(tenant=actor.tenant, user=actor.user, name=name, spec=spec)


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT"))]


def reasons(jobs: list[Job]) -> list[str]:
    return [Job.objects.get(pk=j.pk).status_reason.split(":", 1)[0] for j in jobs]


def end(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, admitted_at=None)


def acme_fills_the_cluster(make_actor, *, waiting: int, gpus_each: int) -> tuple[Any, list[Job], list[Job]]:  # type: ignore[no-untyped-def]
    """Acme runs four 2-GPU jobs (all 8 GPUs) with ``waiting`` more of ``gpus_each`` GPUs queued."""
    a = make_actor("acme")
    Quota.objects.filter(tenant=a.tenant).update(max_queued_jobs=100, max_running_jobs=100, borrow_limit_gpus=100)
    running = [submit(a, 2, name=f"run{i}") for i in range(4)]
    admission.admission_tick()
    queued = [submit(a, gpus_each, name=f"wait{i}") for i in range(waiting)]
    admission.admission_tick()
    return a, running, queued


@pytest.fixture
def full_cluster(make_actor) -> tuple[Any, list[Job], list[Job]]:
    return acme_fills_the_cluster(make_actor, waiting=12, gpus_each=2)


def test_a_pass_over_a_full_cluster_writes_nothing_when_nothing_changed(full_cluster) -> None:
    _, _, queued = full_cluster
    assert reasons(queued) == ["capacity"] * 12
    events = JobEvent.objects.count()

    with CaptureQueriesContext(connection) as ctx:
        result = admission.admission_tick()
    assert result.admitted == [] and len(result.waiting) == 12
    assert writes(ctx) == []
    assert JobEvent.objects.count() == events  # nobody's job page hears of a non-change


def test_a_pass_writes_nothing_when_only_the_free_count_changed(make_actor) -> None:
    _, running, queued = acme_fills_the_cluster(make_actor, waiting=10, gpus_each=4)
    end(running[0])  # 2 GPUs free, still too few for any waiting job

    with CaptureQueriesContext(connection) as ctx:
        assert admission.admission_tick().admitted == []
    assert writes(ctx) == []
    assert reasons(queued) == ["capacity"] * 10


def test_a_pass_costs_the_same_queries_however_long_the_queue(full_cluster) -> None:
    a, _, _ = full_cluster

    def pass_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            admission.admission_tick()
        return len(ctx.captured_queries)

    before = pass_queries()
    more = [submit(a, 2, name=f"more{i}") for i in range(20)]
    admission.admission_tick()  # the newcomers get their first reason
    assert pass_queries() == before
    assert set(reasons(more)) == {"capacity"}


def test_freed_capacity_admits_and_writes_only_for_the_jobs_that_changed(full_cluster) -> None:
    _, running, queued = full_cluster
    end(running[0])  # 2 GPUs free: the first waiting job fits

    with CaptureQueriesContext(connection) as ctx:
        result = admission.admission_tick()
    assert result.admitted == [str(queued[0].pk)]
    # The admitted job: its row (fields and event seq in one UPDATE) and its event. The job now
    # first in line: its detail (same code, so no event). The other ten: nothing.
    written = writes(ctx)
    assert len(written) == 3, written
    assert all(queued[0].pk.hex in sql or queued[1].pk.hex in sql for sql in written), written
    assert reasons(queued[1:]) == ["capacity"] * 11


def test_reasons_follow_capacity_both_ways(make_actor) -> None:
    a, b = make_actor("acme"), make_actor("globex")
    for actor in (a, b):
        Quota.objects.filter(tenant=actor.tenant).update(max_queued_jobs=100, borrow_limit_gpus=100)
    big = submit(a, 8, name="big")
    admission.admission_tick()
    head, theirs = submit(a, 4, name="head"), submit(b, 2, name="theirs")
    admission.admission_tick()
    # Acme holds the whole cluster, so globex is first in line once GPUs free up.
    assert reasons([theirs, head]) == ["capacity", "fair_share"]

    end(big)
    assert set(admission.admission_tick().admitted) == {str(head.pk), str(theirs.pk)}

    again = submit(a, 8, name="again")
    admission.admission_tick()
    assert reasons([again]) == ["capacity"]
    Job.objects.filter(pk__in=[head.pk, theirs.pk]).update(status=JobStatus.CANCELLED, admitted_at=None)
    assert admission.admission_tick().admitted == [str(again.pk)]


def test_a_cancel_that_lands_during_a_pass_wins(make_actor, monkeypatch) -> None:
    """The pass reads the queue without row locks; a job cancelled after that read is not
    admitted, and the capacity it would have taken goes to the next job."""
    a = make_actor("acme")
    first, second = submit(a, 8, name="first"), submit(a, 8, name="second")
    with pass_held_mid_decision(monkeypatch) as outcome:
        lifecycle.job_cancel(job=first)
    assert outcome["result"].admitted == [str(second.pk)]
    first.refresh_from_db()
    assert first.admitted_at is None and first.status in (JobStatus.CANCELLING, JobStatus.CANCELLED)
