"""``RealRuntime``: the controller's :class:`Runtime` over real work, on the wall clock.

The controller and scheduler are the simulator's, unchanged: ``start`` hands a sub-stage to a
:class:`NodeExecutor` (threads in this process, or Ray actors), ``next_event_s`` is the
earliest predicted finish (never earlier than a short poll from now), and ``advance_to`` waits
until that time or until some sub-stage really finishes, whichever is first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jigsaw_engine.errors import WorkerLostError
from jigsaw_engine.graph.substage import SubStage
from jigsaw_engine.real.pipeline import NodeReport, RealPipeline
from jigsaw_engine.tasks import Task, TaskFinished

logger = logging.getLogger(__name__)

POLL_S = 0.02
"""How long ``advance_to`` waits at least when every running sub-stage is overdue: short enough
to notice a finish promptly, long enough not to spin a core the work itself needs."""


class NodeExecutor(Protocol):
    def submit(self, pipeline_id: str, node: SubStage, devices: tuple[int, ...]) -> Hashable:
        """Start ``node`` of ``pipeline_id`` on ``devices``; a handle to wait on."""

    def wait(self, handles: Sequence[Hashable], timeout_s: float) -> list[Hashable]:
        """The handles that have finished, waiting up to ``timeout_s`` for the first one."""

    def result(self, handle: Hashable) -> NodeReport:
        """The finished node's report; raises what the node raised (``WorkerLostError``
        when the process running it died)."""

    def release(self, pipeline_id: str) -> None:
        """The controller is done with ``pipeline_id``: an executor serving a long-running
        engine frees its workers; one serving a single run keeps them for the report."""


@runtime_checkable
class NodeWatchingExecutor(NodeExecutor, Protocol):
    """An executor whose devices live on nodes that can leave (Ray nodes)."""

    def lost_devices(self) -> dict[int, str]:
        """Devices whose node is gone now, each with why (cheap: called at every event)."""


class ThreadExecutor:
    """Runs each pipeline's nodes on threads of this process (tests, the CLI on one machine)."""

    def __init__(self, pipelines: dict[str, RealPipeline], *, max_workers: int = 8) -> None:
        self.pipelines = pipelines
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="jigsaw-node")

    def submit(self, pipeline_id: str, node: SubStage, devices: tuple[int, ...]) -> Hashable:
        # Threads share one interpreter: devices are not pinned here (see RayExecutor).
        return self._pool.submit(self.pipelines[pipeline_id].run_node, node)

    def wait(self, handles: Sequence[Hashable], timeout_s: float) -> list[Hashable]:
        futures = [h for h in handles if isinstance(h, Future)]
        done, _ = wait(futures, timeout=max(0.0, timeout_s), return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, handle: Hashable) -> NodeReport:
        assert isinstance(handle, Future)
        report: NodeReport = handle.result()
        return report

    def release(self, pipeline_id: str) -> None:
        """Kept: ``jigsaw run`` reads every pipeline's metrics after the run."""

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@dataclass(slots=True)
class _Running:
    task: Task
    start_s: float


class RealRuntime:
    """Implements :class:`~jigsaw_engine.tasks.Runtime` on a :class:`NodeExecutor`."""

    def __init__(self, executor: NodeExecutor) -> None:
        self._executor = executor
        self._watch = executor if isinstance(executor, NodeWatchingExecutor) else None
        self._origin = time.monotonic()
        self._running: dict[Hashable, _Running] = {}
        self._aborted: set[Hashable] = set()
        self._refused: list[TaskFinished] = []
        """Sub-stages the executor could not start (no process, no devices): failed at once."""
        self.node_overheads_s: list[float] = []
        """Per finished sub-stage: its span on the clock minus the time its work took (the
        launch, wait and hand-back cost the cost model calls a stage's overhead)."""

    @property
    def now_s(self) -> float:
        return time.monotonic() - self._origin

    def start(self, task: Task) -> None:
        try:
            handle = self._executor.submit(task.pipeline_id, task.node, task.devices)
        except Exception as exc:  # the pipeline fails with the reason; the others go on
            logger.warning("sub-stage %s could not start", task.task_id, exc_info=True)
            now = self.now_s
            self._refused.append(TaskFinished(task, now, now, error=f"{type(exc).__name__}: {exc}"))
            return
        self._running[handle] = _Running(task, self.now_s)

    def next_event_s(self) -> float | None:
        if self._refused:
            return self.now_s
        if not self._running:
            return None
        now = self.now_s
        predicted = min(
            r.start_s + r.task.setup_s + r.task.node.duration_s / r.task.share for r in self._running.values()
        )
        return max(predicted, now + POLL_S) if not self._executor.wait(list(self._running), 0.0) else now

    def advance_to(self, time_s: float) -> list[TaskFinished]:
        """Wait until ``time_s`` or the first real finish; the sub-stages that finished."""
        finished, self._refused = self._refused, []
        if not self._running:
            return finished
        done = self._executor.wait(list(self._running), 0.0 if finished else time_s - self.now_s)
        end_s = self.now_s
        for handle in done:
            entry = self._running.pop(handle)
            if handle in self._aborted:
                self._aborted.discard(handle)
                continue
            try:
                report = self._executor.result(handle)
            except WorkerLostError as exc:  # the process died, not the work: resumable
                logger.warning("sub-stage %s lost its worker: %s", entry.task.task_id, exc)
                finished.append(TaskFinished(entry.task, entry.start_s, end_s, error=str(exc), lost=True))
                continue
            except Exception as exc:  # the pipeline fails; the others go on
                logger.warning("sub-stage %s failed", entry.task.task_id, exc_info=True)
                finished.append(TaskFinished(entry.task, entry.start_s, end_s, error=f"{type(exc).__name__}: {exc}"))
                continue
            self.node_overheads_s.append(max(0.0, end_s - entry.start_s - report.duration_s))
            finished.append(TaskFinished(entry.task, entry.start_s, end_s))
        return sorted(finished, key=lambda f: (f.end_s, f.task.task_id))

    def abort(self, pipeline_id: str) -> list[Task]:
        """Forget ``pipeline_id``'s running sub-stages (their threads finish, unreported)."""
        stopped = []
        for handle, entry in self._running.items():
            if entry.task.pipeline_id == pipeline_id and handle not in self._aborted:
                self._aborted.add(handle)
                stopped.append(entry.task)
        self._refused = [f for f in self._refused if f.task.pipeline_id != pipeline_id]
        return stopped

    def release(self, pipeline_id: str) -> None:
        self._executor.release(pipeline_id)

    def lost_devices(self) -> dict[int, str]:
        """What the executor says is gone; threads in this process lose nothing."""
        return self._watch.lost_devices() if self._watch is not None else {}

    def device_load(self) -> dict[int, float]:
        load: dict[int, float] = {}
        for handle, entry in self._running.items():
            if handle in self._aborted:
                continue
            for device in entry.task.devices:
                load[device] = load.get(device, 0.0) + entry.task.share
        return load
