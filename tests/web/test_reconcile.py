"""The reconciler repairs what crashes leave behind: a lost dispatch, a restarted engine, a
lost cancel, and a pipeline the database no longer accounts for."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs import admission, reconcile, selectors
from webapp.jobs.models import Job, JobCheckpoint, JobStatus
from webapp.jobs.services import engine_events, lifecycle, submit
from webapp.jobs.tasks import dispatch_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture()
def slow_engine() -> Any:
    """A real in-process engine at wall-clock speed: nothing finishes during a test."""
    before = settings.ENGINE_SPEED
    settings.ENGINE_SPEED = 1.0
    engine_gateway.reset_engine_host()
    yield
    settings.ENGINE_SPEED = before
    engine_gateway.reset_engine_host()


def admitted_job(actor: Any, **spec: Any) -> Job:
    job = submit.job_submit(tenant=actor.tenant, user=actor.user, name="r", spec=make_spec(**spec))
    admission.admission_tick()
    job.refresh_from_db()
    assert job.admitted_at is not None
    return job


def age(job: Job, seconds: float) -> None:
    Job.objects.filter(pk=job.pk).update(admitted_at=timezone.now() - timedelta(seconds=seconds))


def test_a_lost_dispatch_is_sent_again_after_a_grace_period(make_actor, slow_engine) -> None:
    job = admitted_job(make_actor("acme"))  # its dispatch task never ran (no worker)
    assert reconcile.reconcile().redispatched == []  # too early to call it lost
    age(job, reconcile.DISPATCH_GRACE_S + 1)
    attempt = Job.objects.get(pk=job.pk).attempt
    assert reconcile.reconcile().redispatched == [str(job.pk)]
    assert Job.objects.get(pk=job.pk).attempt == attempt  # it never ran: the same attempt, sent again
    assert dispatch_job(str(job.pk)) == "dispatched"
    assert engine_gateway.pipeline_states()[str(job.pk)] in ("queued", "starting", "running")
    assert reconcile.reconcile().redispatched == []  # the engine has it now


def test_after_an_engine_restart_running_jobs_recover_from_their_checkpoint(make_actor, slow_engine) -> None:
    job = admitted_job(make_actor("acme"), trainer={"total_steps": 20})
    dispatch_job(str(job.pk))
    engine_events.engine_events_pump()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, current_step=7)
    JobCheckpoint.objects.create(job=job, step=5)

    engine_gateway.reset_engine_host()  # the engine process died: a new one knows nothing
    age(job, reconcile.DISPATCH_GRACE_S + 1)
    result = reconcile.reconcile()
    assert result.redispatched == [str(job.pk)]
    job.refresh_from_db()
    assert job.status == JobStatus.RECOVERING and "resuming after step 5" in job.status_reason
    assert job.attempt == 2
    assert selectors.engine_spec(job)["trainer"]["start_step"] == 5
    assert dispatch_job(str(job.pk)) == "dispatched"
    assert str(job.pk) in engine_gateway.pipeline_states()


def test_a_job_the_engine_lost_while_starting_it_is_sent_again(make_actor, slow_engine) -> None:
    """The engine was killed after it placed the job (``starting``) and before it ran a step.
    The job must not stay ``starting`` forever: it recovers and the engine gets it again."""
    job = admitted_job(make_actor("acme"))
    dispatch_job(str(job.pk))
    engine_events.engine_events_pump()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.STARTING)

    engine_gateway.reset_engine_host()
    age(job, reconcile.DISPATCH_GRACE_S + 1)
    assert reconcile.reconcile().redispatched == [str(job.pk)]
    job.refresh_from_db()
    assert job.status == JobStatus.RECOVERING and job.attempt == 2
    assert dispatch_job(str(job.pk)) == "dispatched"
    assert str(job.pk) in engine_gateway.pipeline_states()
    assert reconcile.reconcile().redispatched == []


def test_lost_cancel_and_pause_requests_are_settled_or_resent(make_actor, slow_engine) -> None:
    actor = make_actor("acme")
    never_ran = admitted_job(actor)
    lifecycle.job_cancel(job=never_ran)  # the cancel task is lost too
    running = admitted_job(actor)
    dispatch_job(str(running.pk))
    lifecycle.job_pause(job=running)
    result = reconcile.reconcile()
    assert result.settled == {str(never_ran.pk): JobStatus.CANCELLED}
    assert result.resent == [str(running.pk)]
    never_ran.refresh_from_db()
    assert never_ran.status == JobStatus.CANCELLED and never_ran.admitted_at is None


def test_a_pipeline_the_database_does_not_hold_is_cancelled_on_the_engine(make_actor, slow_engine) -> None:
    job = admitted_job(make_actor("acme"))
    dispatch_job(str(job.pk))
    Job.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED, admitted_at=None)  # a crash between
    assert reconcile.reconcile().orphans_cancelled == [str(job.pk)]
    assert engine_gateway.pipeline_states()[str(job.pk)] == "cancelled"


def test_a_redelivered_dispatch_never_starts_a_pipeline_twice(make_actor, slow_engine) -> None:
    job = admitted_job(make_actor("acme"))
    for _ in range(3):  # Celery redelivers after a worker dies mid-task (acks_late)
        dispatch_job(str(job.pk))
    _, events, _ = engine_gateway.pull_events(cursor=0, limit=1000)
    starts = [e for e in events if e.pipeline_id == str(job.pk) and e.data.get("status") == "starting"]
    assert len(starts) == 1


def test_a_pipeline_of_a_job_the_database_holds_as_waiting_is_adopted(make_actor, slow_engine) -> None:
    """A database restored from a dump taken before the job's admission: the engine runs the job
    and the database has it waiting. It is admitted as it runs, neither cancelled nor sent again."""
    job = admitted_job(make_actor("acme"))
    dispatch_job(str(job.pk))
    Job.objects.filter(pk=job.pk).update(admitted_at=None, attempt=0)  # the dump's row: never admitted
    result = reconcile.reconcile()
    assert (result.adopted, result.orphans_cancelled, result.redispatched) == ([str(job.pk)], [], [])
    job.refresh_from_db()
    assert job.admitted_at is not None and job.attempt == 1
    assert job.status_reason == reconcile.ADOPTED_REASON
    assert engine_gateway.pipeline_states()[str(job.pk)] in ("queued", "starting", "running")
    assert reconcile.reconcile().adopted == []  # it holds its capacity now
    assert admission.admission_tick().admitted == []  # and is not admitted (or sent) a second time
