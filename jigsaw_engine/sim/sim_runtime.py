"""``SimRuntime``: the :class:`~jigsaw_engine.runtime.protocol.Runtime` on a virtual clock.

Deterministic: finishing tasks are ordered by (time, start sequence). A task given a share
``s`` of its devices runs ``1/s`` times longer; how co-running sub-stages slow each other
beyond that is the interference model's job, applied by whoever chooses the share.
"""

from __future__ import annotations

import heapq

from jigsaw_engine.runtime.protocol import Task, TaskFinished

SHARE_EPSILON = 1e-9


class SimRuntime:
    def __init__(self, num_devices: int) -> None:
        self.num_devices = num_devices
        self._now_s = 0.0
        self._seq = 0
        self._running: list[tuple[float, int, Task, float]] = []  # (end, seq, task, start)
        self._load: dict[int, float] = {}

    @property
    def now_s(self) -> float:
        return self._now_s

    def start(self, task: Task) -> None:
        if not 0 < task.share <= 1:
            raise ValueError(f"share must be in (0, 1], got {task.share}")
        for d in task.devices:
            if not 0 <= d < self.num_devices:
                raise ValueError(f"device {d} does not exist (cluster has {self.num_devices})")
            if self._load.get(d, 0.0) + task.share > 1 + SHARE_EPSILON:
                raise ValueError(f"device {d} is already {self._load[d]:.0%} busy; cannot add {task.share:.0%}")
        for d in task.devices:
            self._load[d] = self._load.get(d, 0.0) + task.share
        self._seq += 1
        end = self._now_s + task.setup_s + task.node.duration_s / task.share
        heapq.heappush(self._running, (end, self._seq, task, self._now_s))

    def next_event_s(self) -> float | None:
        return self._running[0][0] if self._running else None

    def advance_to(self, time_s: float) -> list[TaskFinished]:
        finished: list[TaskFinished] = []
        while self._running and self._running[0][0] <= time_s:
            end, _, task, start = heapq.heappop(self._running)
            self._free(task)
            finished.append(TaskFinished(task, start, end))
        self._now_s = max(self._now_s, time_s)
        return finished

    def abort(self, pipeline_id: str) -> list[Task]:
        aborted = [entry[2] for entry in self._running if entry[2].pipeline_id == pipeline_id]
        self._running = [entry for entry in self._running if entry[2].pipeline_id != pipeline_id]
        heapq.heapify(self._running)
        for task in aborted:
            self._free(task)
        return aborted

    def _free(self, task: Task) -> None:
        for d in task.devices:
            left = self._load[d] - task.share
            if left <= SHARE_EPSILON:
                del self._load[d]
            else:
                self._load[d] = left

    def device_load(self) -> dict[int, float]:
        return dict(self._load)
