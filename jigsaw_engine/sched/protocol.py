"""The ``Scheduler`` protocol: given what is ready and what is busy, decide what runs where.

Schedulers return plain decisions (tasks with devices and shares) and keep no clock of their
own: the controller asks them after every event and applies what they return, so the same
policy object runs on the simulator and on Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from jigsaw_engine.graph.substage import SubStage
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec
from jigsaw_engine.tasks import Task


@dataclass(frozen=True, slots=True)
class ReadyStage:
    pipeline_id: str
    node: SubStage
    chain_s: float = 0.0
    """Predicted time of the node and the rest of its chain on the same devices (a rollout
    worker's remaining sub-stages, or the step's remaining training sub-stages)."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    now_s: float
    num_devices: int
    device_load: Mapping[int, float]
    """Share in use of each busy device."""
    ready: tuple[ReadyStage, ...]
    """Sub-stages whose dependencies are met, in (pipeline arrival, step, graph) order."""
    specs: Mapping[str, PipelineSpec]
    """Every admitted, unfinished pipeline."""
    queued: tuple[str, ...]
    """Pipelines waiting for admission, oldest first."""
    progress: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """(steps done, total steps) of every admitted pipeline."""
    recent_step_s: Mapping[str, float] = field(default_factory=dict)
    """Mean latency of each pipeline's last few steps (absent before its first step ends)."""
    running: tuple[Task, ...] = ()
    """Tasks running now (what is on each device, and how much memory it holds)."""
    rollout_done_s: Mapping[str, float] = field(default_factory=dict)
    """Predicted time each pipeline in rollout finishes its oldest open step's generation
    (when its training will want devices), from the graph's predicted durations."""
    lost: frozenset[int] = frozenset()
    """Devices whose node is gone: nothing may be placed or homed there (each is also in
    ``device_load`` at a full share, so a check of room alone refuses it too)."""

    def usable(self) -> list[int]:
        """Every device not lost, in order."""
        return [d for d in range(self.num_devices) if d not in self.lost]

    def is_free(self, device: int) -> bool:
        return device not in self.device_load


class Scheduler(Protocol):
    """A scheduler may also set ``uses_predictions = True`` to have the controller fill
    :attr:`ReadyStage.chain_s` and :attr:`ClusterView.rollout_done_s` (they cost roll-forwards
    over the open graphs, so others go without; ``rollout_done_s`` is computed per pipeline as
    it is read, so it is read only during the call the view was passed to)."""

    name: str

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        """Which queued pipelines (their specs in ``specs``) start now, in order."""

    def decide(self, view: ClusterView) -> list[Task]:
        """Tasks to start now; each on devices with room for its share."""

    def release(self, pipeline_id: str) -> None:
        """``pipeline_id`` has ended: forget what was reserved for it."""


@runtime_checkable
class Resizer(Protocol):
    """A scheduler that chooses each step's resources (data-parallel width) itself."""

    def resources_for_step(self, view: ClusterView, pipeline_id: str, step: int) -> ResourceSpec:
        """Devices and layout of ``pipeline_id``'s step ``step``, decided when its graph is built."""
