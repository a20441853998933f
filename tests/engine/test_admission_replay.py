"""The queue wait an estimate reports: the service's admission pass replayed forward over what
holds the cluster and what is queued."""

from __future__ import annotations

from jigsaw_engine.control.admission_policy import QueuedJob, TenantLimits, TenantUsage
from jigsaw_engine.control.admission_replay import AdmissionWait, ForecastJob, admission_wait

ME, OTHER, THIRD = "me", "other", "third"
HOUR = 3600.0
NOW = 1000.0
"""The new job's submission time; the jobs already there came before it."""
LOOSE = TenantLimits(guarantee_gpus=0, borrow_limit_gpus=64)


def held(tenant: str, gpus: int, remaining_s: float, *, borrowed: bool = False, step_s: float = 0.0) -> ForecastJob:
    n = next(_ids)
    return ForecastJob(QueuedJob(f"h{n}", tenant, gpus, 0.0, float(n)), remaining_s, step_s, float(n), borrowed)


def queued(tenant: str, gpus: int, run_s: float, *, priority: float = 0.0) -> ForecastJob:
    n = next(_ids)
    return ForecastJob(QueuedJob(f"q{n}", tenant, gpus, priority, float(n)), run_s, step_s=10.0)


_ids = iter(range(1, 1 << 30))


def wait(
    gpus: int,
    *,
    held_jobs: list[ForecastJob] = [],  # noqa: B006 (never mutated)
    queued_jobs: list[ForecastJob] = [],  # noqa: B006
    limits: dict[str, TenantLimits | None] | None = None,
    priority: float = 0.0,
    decayed: dict[str, float] | None = None,
) -> AdmissionWait:
    limits = limits or {}
    decayed = decayed or {}
    tenants = {
        t: TenantUsage(limits=limits.get(t, LOOSE), decayed_gpu_seconds=decayed.get(t, 0.0)) for t in (ME, OTHER, THIRD)
    }
    return admission_wait(
        capacity_gpus=8,
        device_type="h100",
        tenants=tenants,
        held=held_jobs,
        queued=queued_jobs,
        job=QueuedJob("new", ME, gpus, priority, NOW),
        half_life_s=6 * HOUR,
    )


def test_free_gpus_mean_no_wait() -> None:
    found = wait(4, held_jobs=[held(OTHER, 4, 500.0)])
    assert found == AdmissionWait(0.0, 0, None)


def test_waits_for_the_running_job_that_frees_enough() -> None:
    jobs = [held(OTHER, 4, 300.0), held(OTHER, 2, 100.0)]
    # 2 free; 4 wanted: the 2-GPU job ending at 100 s is enough.
    assert wait(4, held_jobs=jobs).wait_s == 100.0
    # 6 wanted: both must end.
    assert wait(6, held_jobs=jobs).wait_s == 300.0


def test_jobs_ahead_of_the_same_share_start_first_and_in_order() -> None:
    # The queued jobs are the new job's own tenant's: same priority and share, so submission
    # order decides. The 8-GPU job runs 100..300; the 2-GPU one starts at 300 beside the new one.
    found = wait(2, held_jobs=[held(OTHER, 8, 100.0)], queued_jobs=[queued(ME, 8, 200.0), queued(ME, 2, 50.0)])
    assert (found.wait_s, found.jobs_ahead) == (300.0, 2)


def test_the_tenants_running_job_limit_holds_it_back() -> None:
    jobs = [held(ME, 1, 400.0), held(OTHER, 1, 50.0)]
    one_job = TenantLimits(guarantee_gpus=0, borrow_limit_gpus=8, max_running_jobs=1)
    assert wait(1, held_jobs=jobs, limits={ME: one_job}).wait_s == 400.0
    assert wait(1, held_jobs=jobs).wait_s == 0.0


def test_borrowed_gpus_come_back_after_a_step_within_the_guarantee() -> None:
    jobs = [held(OTHER, 8, 1000.0, borrowed=True, step_s=30.0)]
    within = TenantLimits(guarantee_gpus=4, borrow_limit_gpus=4)
    beyond = TenantLimits(guarantee_gpus=0, borrow_limit_gpus=8)
    assert wait(4, held_jobs=jobs, limits={ME: within}).wait_s == 30.0
    assert wait(4, held_jobs=jobs, limits={ME: beyond}).wait_s == 1000.0


def test_more_than_the_tenant_may_hold_is_never_admitted_and_says_why() -> None:
    four = TenantLimits(guarantee_gpus=0, borrow_limit_gpus=4)
    found = wait(6, held_jobs=[held(OTHER, 8, 100.0)], limits={ME: four})
    assert found.wait_s is None
    assert found.reason == ("quota", "would hold 6 h100 GPUs; guarantee + borrow limit is 4")
    too_big = wait(16, limits={ME: None})
    assert too_big.wait_s is None and too_big.reason is not None and too_big.reason[0] == "capacity"


# -- where the replay follows the service and the earlier strict-order estimate did not --------


def test_a_tenant_under_its_share_passes_a_busier_tenants_queued_job() -> None:
    """Fair share: OTHER holds the cluster and used it all day; its queued job waits behind a
    job of a tenant with no usage, as the service's pass would order them."""
    jobs = [held(OTHER, 8, 100.0)]
    ahead = [queued(OTHER, 8, 500.0)]
    busy = {OTHER: 8 * 10 * HOUR}
    mine = wait(8, held_jobs=jobs, queued_jobs=ahead, decayed=busy)
    assert (mine.wait_s, mine.jobs_ahead) == (100.0, 0)
    # The same queue, but the new job's tenant is the busy one: it waits its turn.
    theirs = wait(8, held_jobs=jobs, queued_jobs=ahead, decayed={ME: 8 * 10 * HOUR})
    assert (theirs.wait_s, theirs.jobs_ahead) == (600.0, 1)


def test_another_tenants_limit_keeps_its_queued_job_from_taking_the_gpus() -> None:
    """A job ahead that its own tenant's running-job limit holds back takes no GPUs: the new job
    starts as soon as it fits."""
    one_job = TenantLimits(guarantee_gpus=0, borrow_limit_gpus=8, max_running_jobs=1)
    found = wait(
        4,
        held_jobs=[held(OTHER, 4, 1000.0), held(THIRD, 4, 100.0)],
        queued_jobs=[queued(OTHER, 4, 500.0)],
        limits={OTHER: one_job},
    )
    assert (found.wait_s, found.jobs_ahead) == (100.0, 0)


def test_a_higher_priority_job_queued_later_still_goes_first() -> None:
    found = wait(8, held_jobs=[held(OTHER, 8, 100.0)], queued_jobs=[queued(THIRD, 8, 50.0, priority=5.0)])
    assert (found.wait_s, found.jobs_ahead) == (150.0, 1)
    # A lower-priority one does not.
    found = wait(8, held_jobs=[held(OTHER, 8, 100.0)], queued_jobs=[queued(THIRD, 8, 50.0, priority=-5.0)])
    assert (found.wait_s, found.jobs_ahead) == (100.0, 0)


def test_a_reclaimed_job_queues_again_with_what_is_left_of_its_run() -> None:
    """OTHER borrows the whole cluster; THIRD's guaranteed job reclaims it at its next checkpoint
    (30 s) and runs 500 s; OTHER's job, queued again, has the smaller share than the busy new job's
    tenant, so it goes first with its 970 s left."""
    found = wait(
        8,
        held_jobs=[held(OTHER, 8, 1000.0, borrowed=True, step_s=30.0)],
        queued_jobs=[queued(THIRD, 8, 500.0)],
        limits={THIRD: TenantLimits(guarantee_gpus=8, borrow_limit_gpus=0)},
        decayed={ME: 8 * 10 * HOUR},
    )
    assert (found.wait_s, found.jobs_ahead) == (30.0 + 500.0 + 970.0, 2)
