"""A property test of the job state machine (Hypothesis): whatever sequence of engine
reports and user actions arrives, in any order, the stored job stays consistent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenants.models import Quota
from tests.engine.builders import make_spec
from webapp.jobs.errors import InvalidTransition
from webapp.jobs.models import TERMINAL_STATUSES, TRANSITIONS, EventKind, Job, JobEvent, JobStatus
from webapp.jobs.services import lifecycle, submit

pytestmark = pytest.mark.django_db(transaction=True)

ACTIONS = st.one_of(
    st.tuples(st.just("engine"), st.sampled_from(JobStatus.values)),
    st.tuples(st.sampled_from(["pause", "resume", "cancel", "admit"]), st.just("")),
)


def apply(job_id: Any, action: str, status: str) -> bool:
    """Run one action; True if the job's status is expected to have changed."""
    job = Job.objects.get(pk=job_id)
    try:
        if action == "engine":
            return lifecycle.job_transition(job_id=job_id, to=status, reason="reported")
        if action == "pause":
            return lifecycle.job_pause(job=job)
        if action == "resume":
            lifecycle.job_resume(job=job)
            return True
        if action == "cancel":
            lifecycle.job_cancel(job=job)
            return True
        if job.status == JobStatus.QUEUED and job.admitted_at is None:
            lifecycle.job_admit(job=job, borrowed=False)
        return False
    except InvalidTransition:
        return False


def test_any_sequence_keeps_the_job_consistent(make_actor: Any) -> None:
    actor = make_actor("statemachine")  # one tenant, a fresh job per example
    Quota.objects.filter(tenant=actor.tenant).update(max_queued_jobs=100_000)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(actions=st.lists(ACTIONS, min_size=1, max_size=12))
    def check(actions: list[tuple[str, str]]) -> None:
        run_sequence(actor, actions)

    check()


def run_sequence(actor: Any, actions: list[tuple[str, str]]) -> None:
    job = submit.job_submit(tenant=actor.tenant, user=actor.user, name="sm", spec=make_spec())
    seen_terminal: str | None = None
    ever_running = False
    for action, status in actions:
        before = Job.objects.get(pk=job.pk).status
        events_before = JobEvent.objects.filter(job=job, kind=EventKind.STATUS).count()
        changed = apply(job.pk, action, status)
        after = Job.objects.get(pk=job.pk)
        status_events = list(JobEvent.objects.filter(job=job, kind=EventKind.STATUS).order_by("seq"))

        if seen_terminal is not None:  # terminal states are absorbing
            assert after.status == seen_terminal
        if after.status != before:  # every change is an allowed edge, and leaves one event
            assert after.status in TRANSITIONS[before], (before, after.status)
            assert status_events[-1].data["status"] == after.status
            assert len(status_events) >= events_before + 1
        elif changed and action == "engine":
            pytest.fail(f"transition {before} -> {status} reported success but nothing changed")
        if after.status in TERMINAL_STATUSES:
            seen_terminal = after.status
            assert after.finished_at is not None and after.admitted_at is None
        else:
            assert after.finished_at is None
        ever_running = ever_running or after.status == JobStatus.RUNNING
        assert (after.started_at is not None) == ever_running
        if after.status == JobStatus.PAUSED:
            assert after.admitted_at is None  # a paused job holds no capacity
        # Events are numbered 1..n without gaps.
        seqs = list(JobEvent.objects.filter(job=job).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, after.last_event_seq + 1))
