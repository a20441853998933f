"""The admission decision on hand-made cases, as the service and the arrivals simulator both
call it: who is admitted, in what order, on whose capacity, the reason every other job gives,
and which borrowed jobs are asked to give capacity back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jigsaw_engine.control.admission_policy import (
    HeldJob,
    QueuedJob,
    TenantKey,
    TenantLimits,
    TenantUsage,
    decide_admission,
)


@dataclass
class Recorder:
    """Effects that record what a pass wrote; ``refuse`` lists jobs whose admit fails (cancelled)."""

    borrowed: list[HeldJob] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    admits: list[tuple[str, bool]] = field(default_factory=list)
    waits: dict[str, tuple[str, str]] = field(default_factory=dict)
    paused: list[str] = field(default_factory=list)

    def admit(self, job: QueuedJob, *, borrowed: bool) -> bool:
        if job.job_id in self.refuse:
            return False
        self.admits.append((job.job_id, borrowed))
        return True

    def wait(self, job: QueuedJob, code: str, detail: str) -> None:
        self.waits[job.job_id] = (code, detail)

    def borrowed_jobs(self, for_tenant: TenantKey) -> Sequence[HeldJob]:
        return [j for j in self.borrowed if j.tenant != for_tenant]

    def pause(self, job: HeldJob) -> bool:
        self.paused.append(job.job_id)
        return True


def tenant(guarantee: int = 8, borrow: int = 0, **usage: float) -> TenantUsage:
    limits = TenantLimits(
        guarantee_gpus=guarantee,
        borrow_limit_gpus=borrow,
        weight=float(usage.pop("weight", 1.0)),
        max_running_jobs=int(usage.pop("max_running", 1 << 30)),
        monthly_gpu_hours=float(usage.pop("budget", float("inf"))),
    )
    return TenantUsage(limits=limits, **usage)  # type: ignore[arg-type]


def job(job_id: str, owner: str, gpus: int, *, priority: float = 1.0, at: float = 0.0) -> QueuedJob:
    return QueuedJob(job_id, owner, gpus, priority, at)


def run(tenants: dict[str, TenantUsage], queued: list[QueuedJob], effects: Recorder, capacity: int = 8):  # type: ignore[no-untyped-def]
    return decide_admission(capacity_gpus=capacity, device_type="h100", tenants=tenants, queued=queued, effects=effects)


def test_priority_first_then_the_tenant_with_the_smaller_share_then_submission_time() -> None:
    tenants = {"heavy": tenant(decayed_gpu_seconds=36000.0), "light": tenant()}
    queued = [
        job("heavy-early", "heavy", 2, at=1.0),
        job("light-late", "light", 2, at=5.0),
        job("light-early", "light", 2, at=2.0),
        job("urgent", "heavy", 2, priority=3.0, at=9.0),
    ]
    effects = Recorder()
    outcome = run(tenants, queued, effects)
    assert outcome.admitted == ["urgent", "light-early", "light-late", "heavy-early"]

    # A weight of 100 makes heavy's ten hours count for less than light's one.
    tenants = {"heavy": tenant(decayed_gpu_seconds=36000.0, weight=100.0), "light": tenant(decayed_gpu_seconds=3600.0)}
    outcome = run(tenants, [job("light", "light", 8), job("heavy", "heavy", 8, at=1.0)], Recorder())
    assert outcome.admitted == ["heavy"] and outcome.waiting == {"light": "capacity"}


def test_a_job_that_does_not_fit_is_not_overtaken_by_smaller_ones() -> None:
    tenants = {"a": tenant(held_gpus=6, running_jobs=1), "b": tenant()}
    effects = Recorder()
    outcome = run(
        tenants, [job("urgent", "b", 4, priority=3.0), job("small", "a", 2), job("b-small", "b", 1, at=1.0)], effects
    )
    assert outcome.admitted == []
    assert outcome.waiting == {"urgent": "capacity", "small": "priority", "b-small": "priority"}

    # Same priority: another tenant's job waits for fair share, the blocked tenant's own for capacity.
    effects = Recorder()
    tenants = {"a": tenant(held_gpus=6, running_jobs=1), "b": tenant(), "c": tenant(decayed_gpu_seconds=1e6)}
    outcome = run(tenants, [job("big", "b", 4), job("b-small", "b", 1, at=1.0), job("c-small", "c", 1)], effects)
    assert outcome.waiting == {"big": "capacity", "b-small": "capacity", "c-small": "fair_share"}
    assert effects.waits["b-small"][1] == "an earlier job of your tenant is waiting for capacity"


def test_beyond_the_guarantee_is_borrowed_up_to_the_borrow_limit() -> None:
    tenants = {"a": tenant(guarantee=4, borrow=4)}
    effects = Recorder()
    outcome = run(tenants, [job("own", "a", 4), job("lent", "a", 4, at=1.0)], effects)
    assert effects.admits == [("own", False), ("lent", True)]
    assert outcome.admitted == ["own", "lent"]

    tenants = {"a": tenant(guarantee=4, borrow=4, held_gpus=8, running_jobs=2)}
    effects = Recorder()
    run(tenants, [job("third", "a", 2)], effects, capacity=16)
    assert effects.waits["third"] == ("quota", "would hold 10 h100 GPUs; guarantee + borrow limit is 8")


def test_a_tenant_without_a_quota_only_borrows() -> None:
    effects = Recorder()
    run({"free": TenantUsage(limits=None)}, [job("j", "free", 8)], effects)
    assert effects.admits == [("j", True)]


def test_running_job_limit_and_spent_budget_keep_jobs_waiting() -> None:
    effects = Recorder()
    run({"a": tenant(max_running=1, running_jobs=1, held_gpus=1)}, [job("second", "a", 1)], effects)
    assert effects.waits["second"] == ("quota", "1 jobs running, the limit is 1")
    effects = Recorder()
    run({"a": tenant(budget=1.0, spent_gpu_hours=1.2)}, [job("over", "a", 1)], effects)
    assert effects.waits["over"] == ("budget", "this month's 1 GPU-hours are spent (1.2 used)")


def test_a_guaranteed_job_reclaims_borrowed_jobs_newest_first_and_only_as_many_as_it_needs() -> None:
    tenants = {
        "a": tenant(guarantee=4, borrow=4, held_gpus=8, running_jobs=3),
        "b": tenant(guarantee=4),
    }
    effects = Recorder(
        borrowed=[
            HeldJob("old", "a", 2, admitted_s=1.0, pausing=False),
            HeldJob("new", "a", 2, admitted_s=9.0, pausing=False),
            HeldJob("newer-own", "b", 2, admitted_s=10.0, pausing=False),
        ]
    )
    outcome = run(tenants, [job("theirs", "b", 2)], effects)
    assert outcome.reclaiming == ["new"] and effects.paused == ["new"]
    code, detail = effects.waits["theirs"]
    assert code == "capacity" and "reclaiming borrowed GPUs from 1 job(s)" in detail

    # Next pass: the job asked is still pausing; it counts, and nobody else is asked.
    effects.borrowed[1] = HeldJob("new", "a", 2, admitted_s=9.0, pausing=True)
    effects.paused.clear()
    outcome = run(tenants, [job("theirs", "b", 2)], effects)
    assert outcome.reclaiming == [] and effects.paused == []
    assert "from 1 job(s)" in effects.waits["theirs"][1]


def test_a_job_beyond_its_guarantee_reclaims_nothing() -> None:
    tenants = {"a": tenant(guarantee=4, borrow=4, held_gpus=8, running_jobs=2), "b": tenant(guarantee=2, borrow=8)}
    effects = Recorder(borrowed=[HeldJob("lent", "a", 4, admitted_s=1.0, pausing=False)])
    outcome = run(tenants, [job("big", "b", 4)], effects)
    assert outcome.reclaiming == [] and outcome.waiting == {"big": "capacity"}


def test_an_admit_that_fails_takes_no_capacity() -> None:
    effects = Recorder(refuse={"first"})
    outcome = run({"a": tenant()}, [job("first", "a", 8), job("second", "a", 8, at=1.0)], effects)
    assert outcome.admitted == ["second"]
