"""The ``Scheduler`` protocol: given what is ready and what is busy, decide what runs where.

Schedulers return plain decisions (tasks with devices and shares) and keep no clock of their
own: the controller asks them after every event and applies what they return, so the same
policy object runs on the simulator and on Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from jigsaw_engine.graph.substage import SubStage
from jigsaw_engine.runtime.protocol import Task
from jigsaw_engine.spec.pipeline import PipelineSpec


@dataclass(frozen=True, slots=True)
class ReadyStage:
    pipeline_id: str
    node: SubStage


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

    def is_free(self, device: int) -> bool:
        return device not in self.device_load


class Scheduler(Protocol):
    name: str

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        """Which queued pipelines (their specs in ``specs``) start now, in order."""

    def decide(self, view: ClusterView) -> list[Task]:
        """Tasks to start now; each on devices with room for its share."""

    def release(self, pipeline_id: str) -> None:
        """``pipeline_id`` has ended: forget what was reserved for it."""
