"""How long a job submitted now would wait for admission: the service's own admission pass
(:func:`~jigsaw_engine.control.admission_policy.decide_admission`) replayed forward in time over
forecasts, so the estimate and the service apply one set of rules and cannot drift apart.

The replay's clock starts now. At now and at each time a job holding GPUs ends (its forecast
end) or reaches the checkpoint a reclaim asked it to pause at, the pass is offered every queued
job and the new one, with each tenant's usage as it would be then:

- GPUs held count against their tenant's limits (``max_running_jobs``, guarantee + borrow
  limit) and fair share; fair-share usage decays with the service's half-life and grows by the
  GPU-seconds held, and this month's GPU-hours grow by them too (budgets);
- an admitted job holds its GPUs for its forecast run;
- a borrowed job the pass reclaims hands its GPUs back at its next checkpoint (one step later)
  and queues again with its first submission time, as the service's reclaim does.

The wait is the time of the pass that admits the new job. It never is admitted when the replay
runs out of events with the job still waiting: the reason is the pass's last one for it. Not
replayed: jobs submitted later (a higher priority one would pass it) and forecasts' errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from jigsaw_engine.control.admission_policy import HeldJob, QueuedJob, TenantKey, TenantUsage, decide_admission

PASSES_PER_JOB = 20
"""Bound on the replay's passes, per job in it: every pass but the last follows an event, and a
job ends once, so the bound only stops a pathological cycle of reclaims."""


@dataclass(frozen=True, slots=True)
class ForecastJob:
    """A job queued or holding GPUs, with what its forecast says is left of it: ``remaining_s``
    until it ends once admitted (holding GPUs: from now), and ``step_s``, its pace (a reclaim
    gets its GPUs back this long after asking, at its next checkpoint). Holding GPUs only:
    ``admitted_s`` in the queued jobs' clock (reclaims take the newest first), ``borrowed``,
    and ``pausing``: already asked to pause for a reclaim, so its GPUs come back at its next
    checkpoint and it queues again."""

    job: QueuedJob
    remaining_s: float
    step_s: float
    admitted_s: float = 0.0
    borrowed: bool = False
    pausing: bool = False


@dataclass(frozen=True, slots=True)
class AdmissionWait:
    wait_s: float | None
    """Seconds from now until a pass admits the job; None if none would."""
    jobs_ahead: int
    """Queued jobs the replay admits before it."""
    reason: tuple[str, str] | None
    """(code, detail) the pass gives for the job's wait at the replay's end, when it never is
    admitted; None when it is."""


@dataclass(slots=True)
class _Holding:
    job: ForecastJob
    held_from_s: float
    """In the queued jobs' clock (``created_s``): reclaims take the newest first."""
    admitted_at: float
    """On the replay's clock."""
    leaves_s: float
    pausing: bool


@dataclass(slots=True)
class _Replay:
    capacity_gpus: int
    device_type: str
    tenants: Mapping[TenantKey, TenantUsage]
    half_life_s: float
    new_id: str
    now_clock: float
    """Now in the queued jobs' clock: the admission time of a job the replay admits."""
    now: float = 0.0
    holding: dict[str, _Holding] = field(default_factory=dict)
    queue: dict[str, ForecastJob] = field(default_factory=dict)
    decayed: dict[TenantKey, float] = field(default_factory=dict)
    spent: dict[TenantKey, float] = field(default_factory=dict)
    admitted_ahead: set[str] = field(default_factory=set)
    admitted: bool = False
    reason: tuple[str, str] | None = None

    # -- AdmissionEffects --------------------------------------------------------------
    def admit(self, job: QueuedJob, *, borrowed: bool) -> bool:
        if job.job_id == self.new_id:
            self.admitted = True
            return True
        queued = self.queue.pop(job.job_id)
        self.admitted_ahead.add(job.job_id)
        self.holding[job.job_id] = _Holding(
            replace(queued, borrowed=borrowed),
            self.now_clock + self.now,
            self.now,
            self.now + queued.remaining_s,
            False,
        )
        return True

    def wait(self, job: QueuedJob, code: str, detail: str) -> None:
        if job.job_id == self.new_id:
            self.reason = (code, detail)

    def borrowed_jobs(self, for_tenant: TenantKey) -> Sequence[HeldJob]:
        return [
            HeldJob(pid, h.job.job.tenant, h.job.job.num_gpus, h.held_from_s, h.pausing)
            for pid, h in sorted(self.holding.items())
            if h.job.borrowed and h.job.job.tenant != for_tenant
        ]

    def pause(self, job: HeldJob) -> bool:
        held = self.holding[job.job_id]
        held.pausing = True
        held.leaves_s = min(held.leaves_s, self.now + held.job.step_s)
        return True

    # -- the replay --------------------------------------------------------------------
    def usages(self) -> dict[TenantKey, TenantUsage]:
        out = {}
        for tenant in {*self.tenants, *(h.job.job.tenant for h in self.holding.values())}:
            mine = [h for h in self.holding.values() if h.job.job.tenant == tenant]
            out[tenant] = TenantUsage(
                limits=self.tenants[tenant].limits if tenant in self.tenants else None,
                decayed_gpu_seconds=self.decayed.get(tenant, 0.0),
                held_gpus=sum(h.job.job.num_gpus for h in mine),
                running_jobs=len(mine),
                spent_gpu_hours=self.spent.get(tenant, 0.0),
            )
        return out

    def advance_to(self, t: float) -> None:
        """Usage accrues while GPUs are held; then jobs due leave (a paused one queues again)."""
        dt = t - self.now
        factor = 0.5 ** (dt / self.half_life_s)
        for tenant in self.decayed:
            self.decayed[tenant] *= factor
        for h in self.holding.values():
            gpu_s = h.job.job.num_gpus * dt
            self.decayed[h.job.job.tenant] = self.decayed.get(h.job.job.tenant, 0.0) + gpu_s
            self.spent[h.job.job.tenant] = self.spent.get(h.job.job.tenant, 0.0) + gpu_s / 3600.0
        self.now = t
        for pid in sorted(p for p, h in self.holding.items() if h.leaves_s <= t):
            h = self.holding.pop(pid)
            left = h.job.remaining_s - (t - h.admitted_at)
            if h.pausing and left > 0:
                self.queue[pid] = replace(h.job, remaining_s=left, borrowed=False, pausing=False)

    def admission_pass(self, job: QueuedJob) -> None:
        decide_admission(
            capacity_gpus=self.capacity_gpus,
            device_type=self.device_type,
            tenants=self.usages(),
            queued=[q.job for q in self.queue.values()] + [job],
            effects=self,
        )


def admission_wait(
    *,
    capacity_gpus: int,
    device_type: str,
    tenants: Mapping[TenantKey, TenantUsage],
    held: Sequence[ForecastJob],
    queued: Sequence[ForecastJob],
    job: QueuedJob,
    half_life_s: float,
) -> AdmissionWait:
    """When ``job`` (its ``created_s`` now) would be admitted, the service's admission replayed
    forward (see the module's rules) from ``held`` (holding GPUs now) and ``queued``.

    ``tenants`` gives each tenant's limits, fair-share usage and month's GPU-hours now; what
    they hold is counted from ``held``. ``half_life_s`` is the service's fair-share half-life."""
    replay = _Replay(
        capacity_gpus=capacity_gpus,
        device_type=device_type,
        tenants=tenants,
        half_life_s=half_life_s,
        new_id=job.job_id,
        now_clock=job.created_s,
        queue={q.job.job_id: q for q in queued},
        decayed={t: u.decayed_gpu_seconds for t, u in tenants.items()},
        spent={t: u.spent_gpu_hours for t, u in tenants.items()},
    )
    for h in held:
        leaves = min(h.remaining_s, h.step_s) if h.pausing else h.remaining_s
        replay.holding[h.job.job_id] = _Holding(h, h.admitted_s, 0.0, max(0.0, leaves), h.pausing)
    for _ in range(PASSES_PER_JOB * (len(held) + len(queued) + 1)):
        replay.admission_pass(job)
        if replay.admitted:
            return AdmissionWait(replay.now, len(replay.admitted_ahead), None)
        if not replay.holding:
            break  # nothing left to end: the next pass would decide the same
        replay.advance_to(min(h.leaves_s for h in replay.holding.values()))
    return AdmissionWait(None, len(replay.admitted_ahead), replay.reason)
