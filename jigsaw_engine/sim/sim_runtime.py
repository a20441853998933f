"""``SimRuntime``: the :class:`~jigsaw_engine.tasks.Runtime` on a virtual clock.

Deterministic: finishing tasks are ordered by (time, start sequence). Each task carries its
remaining work in seconds-at-full-device and runs at a rate the runtime derives, never the
scheduler: alone with the whole device a task runs at rate 1; given a share of a device, or
sharing one with another sub-stage, its rate comes from the interference table
(:mod:`jigsaw_engine.cost.interference`), and it is re-derived whenever a co-runner starts or
finishes, so a sub-stage left alone speeds up again. An elastic task runs on its share plus
whatever nobody has reserved, so it shrinks when a co-runner starts beside it and grows back
when that ends. A task's ``setup_s`` (a context switch over PCIe) runs first, at full speed.
At most two sub-stages share a device: the table describes pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.cost.interference import InterferenceTable, load_interference_table
from jigsaw_engine.graph.substage import ResourceClass
from jigsaw_engine.tasks import Task, TaskFinished

SHARE_EPSILON = 1e-9
TIME_EPSILON = 1e-9


def device_class(resource: ResourceClass) -> str:
    """The table's class of a sub-stage on a device (host-bound work placed on devices, such as
    loading weights, moves memory)."""
    return "compute" if resource is ResourceClass.COMPUTE else "memory"


@dataclass(slots=True)
class _Running:
    task: Task
    seq: int
    start_s: float
    setup_left_s: float
    work_left_s: float
    rate: float = 1.0
    share: float = 1.0
    """Share of its devices in use now (more than reserved for an elastic task alone)."""
    share_time: float = 0.0
    """Integral of ``share`` over the time it has run."""

    def eta_s(self, now_s: float) -> float:
        return now_s + self.setup_left_s + self.work_left_s / self.rate


class SimRuntime:
    def __init__(self, num_devices: int, interference: InterferenceTable | None = None) -> None:
        self.num_devices = num_devices
        self.interference = interference or load_interference_table()
        self._now_s = 0.0
        self._seq = 0
        self._running: dict[str, _Running] = {}
        self._on_device: dict[int, list[str]] = {}
        self._load: dict[int, float] = {}
        self._next: float | None = None
        self._next_valid = True
        """The earliest finish, cached: it only changes when a task starts, ends or is re-rated."""

    @property
    def now_s(self) -> float:
        return self._now_s

    def start(self, task: Task) -> None:
        if not 0 < task.share <= 1:
            raise ValueError(f"share must be in (0, 1], got {task.share}")
        if task.task_id in self._running:
            raise ValueError(f"{task.task_id} is already running")
        load = self._load  # read only here (device_load() copies it)
        for d in task.devices:
            if not 0 <= d < self.num_devices:
                raise ValueError(f"device {d} does not exist (cluster has {self.num_devices})")
            if load.get(d, 0.0) + task.share > 1 + SHARE_EPSILON:
                raise ValueError(f"device {d} is already {load[d]:.0%} busy; cannot add {task.share:.0%}")
            on = [self._running[t].task for t in self._on_device.get(d, [])]
            if len(on) >= 2:
                raise ValueError(f"device {d} already runs two sub-stages; the interference table covers pairs")
            if task.elastic and any(t.elastic for t in on):
                raise ValueError(f"device {d} already runs an elastic sub-stage")
        self._seq += 1
        self._running[task.task_id] = _Running(
            task, self._seq, self._now_s, task.setup_s, task.node.duration_s, share=task.share
        )
        for d in task.devices:
            self._on_device.setdefault(d, []).append(task.task_id)
            self._load[d] = self._load.get(d, 0.0) + task.share
        self._rerate(task.devices)

    def next_event_s(self) -> float | None:
        if not self._next_valid:
            now = self._now_s  # r.eta_s(now), inlined: this is the simulator's hottest loop
            self._next = min(
                (now + r.setup_left_s + r.work_left_s / r.rate for r in self._running.values()), default=None
            )
            self._next_valid = True
        return self._next

    def advance_to(self, time_s: float) -> list[TaskFinished]:
        finished: list[TaskFinished] = []
        while self._running:
            nxt = self.next_event_s()
            assert nxt is not None
            if nxt > time_s:
                break
            self._run_until(nxt)
            due = nxt + TIME_EPSILON
            done = sorted(
                (r for r in self._running.values() if nxt + r.setup_left_s + r.work_left_s / r.rate <= due),
                key=lambda r: r.seq,
            )
            for r in done:
                self._remove(r.task)
                elapsed = nxt - r.start_s
                mean_share = r.share_time / elapsed if elapsed > 0 else r.share
                finished.append(TaskFinished(r.task, r.start_s, nxt, mean_share))
            self._rerate(tuple(d for r in done for d in r.task.devices))
        self._run_until(max(self._now_s, time_s))
        return finished

    def abort(self, pipeline_id: str) -> list[Task]:
        aborted = [r.task for r in self._running.values() if r.task.pipeline_id == pipeline_id]
        for task in aborted:
            self._remove(task)
        self._rerate(tuple(d for t in aborted for d in t.devices))
        return aborted

    def device_load(self) -> dict[int, float]:
        return dict(self._load)

    def lost_devices(self) -> dict[int, str]:
        """None: a simulated cluster loses no node."""
        return {}

    def release(self, pipeline_id: str) -> None:
        """Nothing to free: a simulated pipeline holds no workers."""

    def rate_of(self, task_id: str) -> float:
        """The current speed of a running task relative to the device to itself."""
        return self._running[task_id].rate

    # -- internals ---------------------------------------------------------------------
    def _run_until(self, time_s: float) -> None:
        dt = time_s - self._now_s
        if dt > 0:
            for r in self._running.values():  # inlined: called for every running task at every event
                r.share_time += r.share * dt
                left = r.setup_left_s
                setup = left if left < dt else dt  # min(dt, left)
                r.setup_left_s = left - setup
                work = r.work_left_s - (dt - setup) * r.rate
                r.work_left_s = work if work > 0.0 else 0.0  # max(0.0, work)
        self._now_s = time_s

    def _remove(self, task: Task) -> None:
        self._next_valid = False
        del self._running[task.task_id]
        for d in task.devices:
            ids = self._on_device[d]
            ids.remove(task.task_id)
            self._load[d] -= task.share
            if not ids:
                del self._on_device[d]
                del self._load[d]

    def _rerate(self, devices: tuple[int, ...]) -> None:
        """Re-derive the share and rate of every task on ``devices``: its slowest device decides."""
        self._next_valid = False
        affected = {t for d in devices for t in self._on_device.get(d, [])}
        for task_id in sorted(affected):
            r = self._running[task_id]
            r.share = min((self._share_on(d, r.task) for d in r.task.devices), default=r.task.share)
            slowdown = max((self._slowdown_on(d, r.task) for d in r.task.devices), default=1.0)
            r.rate = 1.0 / slowdown

    def _others(self, device: int, task: Task) -> list[Task]:
        return [self._running[t].task for t in self._on_device[device] if t != task.task_id]

    def _share_on(self, device: int, task: Task) -> float:
        if not task.elastic:
            return task.share
        return 1.0 - sum(o.share for o in self._others(device, task))

    def _slowdown_on(self, device: int, task: Task) -> float:
        others = self._others(device, task)
        cls = device_class(task.node.resource)
        share = self._share_on(device, task)
        if not others:
            return self.interference.slowdown(cls, share)
        other = others[0]
        return self.interference.slowdown(cls, share, device_class(other.node.resource), self._share_on(device, other))
