"""The queue wait an estimate reports: admission replayed forward over what holds the cluster
and what waits ahead."""

from __future__ import annotations

from webapp.jobs.queue_wait import HeldJob, QueuedJob, TenantLimits, queue_wait_s

ME, OTHER = 1, 2


def test_free_gpus_mean_no_wait() -> None:
    held = [HeldJob(OTHER, 4, remaining_s=500.0)]
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 4, 100.0), limits=None) == 0.0


def test_waits_for_the_running_job_that_frees_enough() -> None:
    held = [HeldJob(OTHER, 4, remaining_s=300.0), HeldJob(OTHER, 2, remaining_s=100.0)]
    # 2 free; 4 wanted: the 2-GPU job ending at 100 s is enough.
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 4, 50.0), limits=None) == 100.0
    # 6 wanted: both must end.
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 6, 50.0), limits=None) == 300.0


def test_jobs_ahead_start_first_and_in_order() -> None:
    held = [HeldJob(OTHER, 8, remaining_s=100.0)]
    ahead = [QueuedJob(OTHER, 8, 200.0), QueuedJob(OTHER, 2, 50.0)]
    # The 8-GPU job ahead runs 100..300; the 2-GPU one starts at 300 beside the new one.
    assert queue_wait_s(capacity=8, held=held, ahead=ahead, job=QueuedJob(ME, 2, 10.0), limits=None) == 300.0


def test_the_tenants_running_job_limit_holds_it_back() -> None:
    held = [HeldJob(ME, 1, remaining_s=400.0), HeldJob(OTHER, 1, remaining_s=50.0)]
    limits = TenantLimits(max_running_jobs=1, max_gpus=8, guaranteed_gpus=0)
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 1, 10.0), limits=limits) == 400.0
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 1, 10.0), limits=None) == 0.0


def test_borrowed_gpus_come_back_after_a_step_within_the_guarantee() -> None:
    held = [HeldJob(OTHER, 8, remaining_s=1000.0, borrowed=True, step_s=30.0)]
    within = TenantLimits(max_running_jobs=4, max_gpus=8, guaranteed_gpus=4)
    beyond = TenantLimits(max_running_jobs=4, max_gpus=8, guaranteed_gpus=0)
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 4, 10.0), limits=within) == 30.0
    assert queue_wait_s(capacity=8, held=held, ahead=[], job=QueuedJob(ME, 4, 10.0), limits=beyond) == 1000.0


def test_more_than_the_tenant_may_hold_is_never_admitted() -> None:
    limits = TenantLimits(max_running_jobs=4, max_gpus=4, guaranteed_gpus=0)
    assert queue_wait_s(capacity=8, held=[], ahead=[], job=QueuedJob(ME, 6, 10.0), limits=limits) is None
    assert queue_wait_s(capacity=8, held=[], ahead=[], job=QueuedJob(ME, 16, 10.0), limits=None) is None
