"""The cluster as a service on the simulator: jobs arrive over a day, wait, are admitted by the
service's own rules (:func:`~jigsaw_engine.control.admission_policy.decide_admission`), run
under one policy, and leave.

Admission counts GPUs as the service does: a job holds the GPUs it asked for from admission
until it ends or pauses. Tenants' fair-share usage is the GPU-seconds they held, decayed with
the service's half-life. A borrowed job reclaimed for another tenant's guarantee pauses at its
next step boundary (its checkpoint) and queues again with its first submission time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jigsaw_engine.bench.arrivals_file import Arrival, ArrivalsFile
from jigsaw_engine.bench.simulate import POLICIES, Policy, run_policy
from jigsaw_engine.contracts import PipelineState
from jigsaw_engine.control.admission_policy import (
    HeldJob,
    QueuedJob,
    TenantKey,
    TenantLimits,
    TenantUsage,
    decide_admission,
)
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile

FAIR_SHARE_HALF_LIFE_S = 6 * 3600.0
"""As the service's: usage this old counts half in fair share."""
DRAIN_DAYS = 3.0
"""After the day, jobs still queued or running go on for at most this many days more (their
completion times count); a job not done by then is reported as unfinished."""


@dataclass(slots=True)
class JobRun:
    """One job's life in the service, on the simulator's clock."""

    arrival: Arrival
    admitted_s: float | None = None
    """First admission."""
    ended_s: float | None = None
    borrowed: bool = False
    pausing: bool = False
    reclaims: int = 0
    held_from_s: float = 0.0
    """Its latest admission: reclaims take the newest first."""
    held_since_s: float | None = None
    """Held GPU-seconds are charged from here (moved to the day's end once counted)."""
    held_gpu_s: float = 0.0
    """GPU-seconds held up to the day's end."""


@dataclass(slots=True)
class ServiceRun:
    policy: str
    jobs: dict[str, JobRun]
    controller: ClusterController
    tokens_in_day: int
    queue_samples: list[tuple[float, int]] = field(default_factory=list)
    """(time, jobs waiting) after every change of the queue."""
    held_samples: list[tuple[float, int]] = field(default_factory=list)
    """(time, GPUs held by admitted jobs) after every admission pass."""


class _Service:
    def __init__(self, arrivals: ArrivalsFile, policy: Policy) -> None:
        cluster = arrivals.cluster
        specs = {a.job_id: a.spec for a in arrivals.jobs}
        if policy.plan is not None:
            self.specs, scheduler = policy.plan(cluster, specs)
        else:
            self.specs = {pid: policy.transform(s, cluster) for pid, s in specs.items()}
            scheduler = policy.make_scheduler()
        cost = RooflineCostModel(load_device_profile(cluster.device_type))
        self.controller = ClusterController(cluster, cost, scheduler=scheduler, graph_config=policy.graph_config)
        self.arrivals = arrivals
        self.jobs = {a.job_id: JobRun(a) for a in arrivals.jobs}
        self.limits = {
            t.name: TenantLimits(
                guarantee_gpus=t.guarantee_gpus, borrow_limit_gpus=t.borrow_limit_gpus, weight=t.weight
            )
            for t in arrivals.tenants
        }
        self.decayed = {t.name: 0.0 for t in arrivals.tenants}
        self.decayed_at = 0.0
        self.queue: list[str] = []
        self.submitted: set[str] = set()
        self.held: set[str] = set()

    # -- AdmissionEffects --------------------------------------------------------------
    def admit(self, job: QueuedJob, *, borrowed: bool) -> bool:
        run = self.jobs[job.job_id]
        now = self.controller.now_s
        if job.job_id in self.submitted:
            self.controller.resume(job.job_id)
        else:
            self.controller.submit(job.job_id, self.specs[job.job_id])
            self.submitted.add(job.job_id)
        if run.admitted_s is None:
            run.admitted_s = now
        run.borrowed, run.held_from_s, run.held_since_s = borrowed, now, now
        self.queue.remove(job.job_id)
        self.held.add(job.job_id)
        return True

    def wait(self, job: QueuedJob, code: str, detail: str) -> None:
        return None

    def borrowed_jobs(self, for_tenant: TenantKey) -> Sequence[HeldJob]:
        """As the service's: borrowed jobs the engine has started (one it still queues has no
        checkpoint to stop at), and those already pausing."""
        found = []
        for pid in sorted(self.held):
            run = self.jobs[pid]
            if not run.borrowed or run.arrival.tenant == for_tenant:
                continue
            if run.pausing or self.controller.state_of(pid) in (PipelineState.STARTING, PipelineState.RUNNING):
                gpus = run.arrival.spec.resources.num_gpus
                found.append(HeldJob(pid, run.arrival.tenant, gpus, run.held_from_s, run.pausing))
        return found

    def pause(self, job: HeldJob) -> bool:
        if not self.controller.pause(job.job_id):
            return False
        self.jobs[job.job_id].pausing = True
        self.jobs[job.job_id].reclaims += 1
        return True

    # -- the loop ----------------------------------------------------------------------
    def _release(self, pid: str, now: float) -> None:
        run = self.jobs[pid]
        self.held.discard(pid)
        self._charge(run, now)
        run.held_since_s, run.pausing = None, False

    def _charge(self, run: JobRun, now: float) -> None:
        """GPU-seconds held from ``held_since_s`` to ``now``, within the day, into the job's account."""
        end = min(now, self.arrivals.day_s)
        if run.held_since_s is not None and end > run.held_since_s:
            run.held_gpu_s += (end - run.held_since_s) * run.arrival.spec.resources.num_gpus
            run.held_since_s = end

    def _decay_to(self, now: float) -> None:
        dt = now - self.decayed_at
        if dt <= 0:
            return
        factor = 0.5 ** (dt / FAIR_SHARE_HALF_LIFE_S)
        for tenant in self.decayed:
            self.decayed[tenant] *= factor
        for pid in sorted(self.held):  # one order of float sums in every process
            run = self.jobs[pid]
            self.decayed[run.arrival.tenant] += run.arrival.spec.resources.num_gpus * dt
        self.decayed_at = now

    def _collect(self, now: float) -> None:
        """Jobs that ended or reached their pause since the last look."""
        for pid in sorted(self.held):
            state = self.controller.state_of(pid)
            if state.is_terminal:
                self.jobs[pid].ended_s = now  # the loop visits every event's time
                self._release(pid, now)
            elif state is PipelineState.PAUSED:
                self._release(pid, now)
                self.queue.append(pid)

    def _admission(self, run: ServiceRun) -> None:
        tenants: dict[TenantKey, TenantUsage] = {}
        for name, limits in self.limits.items():
            held = [p for p in self.held if self.jobs[p].arrival.tenant == name]
            tenants[name] = TenantUsage(
                limits=limits,
                decayed_gpu_seconds=self.decayed[name],
                held_gpus=sum(self.jobs[p].arrival.spec.resources.num_gpus for p in held),
                running_jobs=len(held),
            )
        queued = [
            QueuedJob(pid, a.tenant, a.spec.resources.num_gpus, a.spec.priority, a.arrival_s)
            for pid in self.queue
            if (a := self.jobs[pid].arrival)
        ]
        if queued:
            decide_admission(
                capacity_gpus=self.arrivals.cluster.num_devices,
                device_type=self.arrivals.cluster.device_type,
                tenants=tenants,
                queued=queued,
                effects=self,
            )
        now = self.controller.now_s
        run.queue_samples.append((now, len(self.queue)))
        run.held_samples.append((now, sum(self.jobs[p].arrival.spec.resources.num_gpus for p in self.held)))

    def run(self, policy: str) -> ServiceRun:
        day_s = self.arrivals.day_s
        out = ServiceRun(policy, self.jobs, self.controller, 0)
        pending = list(self.arrivals.jobs)
        horizon = day_s * (1.0 + DRAIN_DAYS)
        day_counted = False
        while True:
            next_arrival = pending[0].arrival_s if pending else None
            next_event = self.controller.next_event_time()
            candidates = [t for t in (next_arrival, next_event) if t is not None]
            if not day_counted:
                candidates.append(day_s)
            if not candidates:
                break
            now = min(candidates)
            if now > horizon:
                break
            self._decay_to(now)
            self.controller.advance_to(now)
            if not day_counted and now >= day_s:
                out.tokens_in_day = sum(s.tokens for s in self.controller.finished_steps if s.end_s <= day_s)
                for pid in self.held:
                    self._charge(self.jobs[pid], now)
                day_counted = True
            self._collect(now)
            while pending and pending[0].arrival_s <= now:
                self.queue.append(pending.pop(0).job_id)
            self._admission(out)
        return out


def run_service_day(arrivals: ArrivalsFile, policy: Policy) -> ServiceRun:
    """The day's arrivals under ``policy`` and the service's admission, then the drain."""
    return _Service(arrivals, policy).run(policy.name)


def alone_estimates(arrivals: ArrivalsFile) -> dict[str, float]:
    """Each job's run time alone on the GPUs it asked for, as verl would run it: the estimate a
    user is given and that a job's run is held to."""
    verl = POLICIES["verl-dedicated"]
    return {a.job_id: run_policy(verl, arrivals.cluster, {a.job_id: a.spec}).makespan_s for a in arrivals.jobs}


ARRIVAL_POLICIES = tuple(
    name for name in POLICIES if not name.endswith("-serial") and name not in ("rollmux", "muxserve")
)
"""Policies that run each job on the GPUs admission gave it: a serial deployment (every job on
the whole cluster) or a layout planned across all jobs at once has no place under admission."""
