"""Tasks and the ``Runtime`` protocol: what a scheduler decides, and what runs it, simulated or real.

The controller starts sub-stage tasks on devices and learns when they finish; whether a
virtual clock (:class:`~jigsaw_engine.sim.sim_runtime.SimRuntime`) or Ray actors do the work
is invisible to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jigsaw_engine.graph.substage import SubStage


@dataclass(frozen=True, slots=True)
class Task:
    """One sub-stage of one pipeline's step, placed on devices."""

    pipeline_id: str
    node: SubStage
    devices: tuple[int, ...]
    """Device indices it occupies (empty for host-bound work)."""
    share: float = 1.0
    """Fraction of each device's compute it reserves (1.0 = the device to itself)."""
    elastic: bool = False
    """Also use whatever share of its devices nobody has reserved: a sub-stage that yields
    part of its devices to a memory-bound co-runner and takes them back when that ends (the
    dynamic split). At most one elastic task per device."""
    setup_s: float = 0.0
    """Time before the work itself: bringing another job's state onto the devices (a context
    switch from host memory), charged by the scheduler that chose to switch."""

    @property
    def task_id(self) -> str:
        return f"{self.pipeline_id}/{self.node.node_id}"


@dataclass(frozen=True, slots=True)
class TaskFinished:
    task: Task
    start_s: float
    end_s: float
    mean_share: float | None = None
    """Share of its devices it used on average (elastic tasks use more than they reserve);
    None: its reserved share."""
    error: str | None = None
    """Why a real sub-stage failed (its pipeline fails with it); None: it completed."""
    lost: bool = False
    """With ``error``: the worker process running it died, not the work: the pipeline is
    handed back to be resumed from its checkpoint instead of failing."""


class Runtime(Protocol):
    @property
    def now_s(self) -> float: ...

    def start(self, task: Task) -> None:
        """Begin ``task`` now; its devices must have the share it asks for free."""

    def next_event_s(self) -> float | None:
        """When the next running task finishes (None when nothing runs)."""

    def advance_to(self, time_s: float) -> list[TaskFinished]:
        """Move the clock to ``time_s``; the tasks that finished on the way, in order."""

    def abort(self, pipeline_id: str) -> list[Task]:
        """Stop every running task of ``pipeline_id`` now and free its devices."""

    def device_load(self) -> dict[int, float]:
        """Share of each busy device in use now (idle devices are absent)."""

    def lost_devices(self) -> dict[int, str]:
        """Devices gone now, each with why (its node left the cluster); empty when all are
        there. A lost device comes back when it is no longer listed."""

    def release(self, pipeline_id: str) -> None:
        """``pipeline_id`` has ended or was handed back: free what it holds (real workers)."""
