"""Sub-stages and the per-step graph that connects them (``docs/architecture.md``, the sub-stage graph).

A stage-level view (rollout, then train) hides where devices sit idle; sub-stages expose it:
a rollout worker's decode is split by how many tokens each iteration processes, so the
memory-bound tail, the tool waits and the compute-bound training of other pipelines become
separate pieces a scheduler can fit together.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum


class SubStageKind(StrEnum):
    LOAD = "load"
    """Once per pipeline, before its first rollout: weights loaded, workers started."""
    PREFILL = "prefill"
    DECODE = "decode"
    TOOL = "tool"
    REWARD = "reward"
    OLD_LOGPROB = "old_logprob"
    REF_LOGPROB = "ref_logprob"
    TRAIN = "train"
    WEIGHT_SYNC = "weight_sync"


class ResourceClass(StrEnum):
    COMPUTE = "compute"
    """Bound by FLOPs: prefill, dense decode, log-prob forwards, training."""
    MEMORY = "memory"
    """Bound by HBM bandwidth: medium and tail decode, weight sync."""
    HOST = "host"
    """No accelerator work: tool calls, rule-based rewards."""


@dataclass(frozen=True, slots=True)
class SubStage:
    node_id: str
    """Unique within its graph, e.g. ``s3/w1/decode.tail``."""
    kind: SubStageKind
    step: int
    worker: int | None
    """Data-parallel worker for rollout sub-stages; None for pipeline-wide ones."""
    bucket: str | None
    """``dense`` / ``medium`` / ``tail`` for decode; ``mb<i>`` for train mini-batches."""
    devices: int
    """Accelerators the sub-stage occupies while it runs (0 for host-bound work)."""
    mem_bytes: float
    """Device memory it needs resident on each of those devices."""
    resource: ResourceClass
    duration_s: float
    """Predicted duration with the devices to itself (share 1.0)."""
    tokens: int = 0
    """Tokens it processes: generated for decode, prefilled or trained for the others."""
    workers: int = 1
    """Data-parallel rollout workers of its step (a real pipeline splits the step's prompts
    over that many of its engines)."""


@dataclass(frozen=True, slots=True)
class SubStageGraph:
    """One step of one pipeline: nodes and ``(before, after)`` dependency edges.

    ``enables_rollout_of_step`` says which step's rollout the final weight sync unblocks:
    ``step + 1`` when synchronous, ``step + staleness + 1`` when asynchronous.
    """

    pipeline_id: str
    step: int
    nodes: tuple[SubStage, ...]
    edges: tuple[tuple[str, str], ...]
    enables_rollout_of_step: int
    # Indexes built from nodes and edges (never passed in, so ``dataclasses.replace`` rebuilds them).
    _index: dict[str, SubStage] = field(init=False, compare=False, repr=False)
    _preds: dict[str, list[str]] = field(init=False, compare=False, repr=False)
    _succs: dict[str, list[str]] = field(init=False, compare=False, repr=False)
    _by_worker: dict[int, list[SubStage]] = field(init=False, compare=False, repr=False)
    _pipeline_wide: list[SubStage] = field(init=False, compare=False, repr=False)
    _position: dict[str, int] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        index: dict[str, SubStage] = {}
        position: dict[str, int] = {}
        preds: dict[str, list[str]] = {}
        succs: dict[str, list[str]] = {}
        by_worker: dict[int, list[SubStage]] = {}
        for i, n in enumerate(self.nodes):
            index[n.node_id], position[n.node_id] = n, i
            preds[n.node_id], succs[n.node_id] = [], []
            if n.worker is not None:
                by_worker.setdefault(n.worker, []).append(n)
        for a, b in self.edges:
            preds[b].append(a)
            succs[a].append(b)
        pipeline_wide = [n for n in self.nodes if n.worker is None]
        for name, value in (("_index", index), ("_preds", preds), ("_succs", succs), ("_by_worker", by_worker),
                            ("_position", position), ("_pipeline_wide", pipeline_wide)):  # fmt: skip
            object.__setattr__(self, name, value)

    def node(self, node_id: str) -> SubStage:
        return self._index[node_id]

    def of_kind(self, kind: SubStageKind) -> Iterator[SubStage]:
        return (n for n in self.nodes if n.kind is kind)

    def predecessors(self, node_id: str) -> list[str]:
        return self._preds[node_id]

    def successors(self, node_id: str) -> list[str]:
        return self._succs[node_id]

    def of_worker(self, worker: int) -> list[SubStage]:
        """A rollout worker's sub-stages, in chain order."""
        return self._by_worker.get(worker, [])

    def pipeline_wide(self) -> list[SubStage]:
        """The sub-stages of no particular worker (reward, log-probs, training, sync), in order."""
        return self._pipeline_wide

    def position(self, node_id: str) -> int:
        """Index in ``nodes`` (a topological order)."""
        return self._position[node_id]

    def critical_path_s(self) -> float:
        """Longest chain of durations through the graph (nodes are stored in topological order)."""
        finish: dict[str, float] = {}
        for n in self.nodes:
            start = max((finish[p] for p in self.predecessors(n.node_id)), default=0.0)
            finish[n.node_id] = start + n.duration_s
        return max(finish.values(), default=0.0)

    def device_seconds(self) -> float:
        return sum(n.duration_s * n.devices for n in self.nodes)
