"""What the Jigsaw scheduler's mechanisms share: its options, constants and chain keys."""

from __future__ import annotations

from dataclasses import dataclass, replace

from jigsaw_engine.graph.builder import GraphConfig
from jigsaw_engine.graph.substage import SubStage, SubStageKind
from jigsaw_engine.sched.protocol import ClusterView
from jigsaw_engine.tasks import Task

JIGSAW_GRAPH = GraphConfig(dispatch="longest_first", overlap_rollouts=True, migrate_tails=True, early_logprobs=True)
"""How Jigsaw's pipelines are cut into sub-stages: length-aware dispatch, an async worker's next
rollout beside its tail, long-tail migration."""
EPS = 1e-9
MEMORY_FRACTION = 0.9
"""Share of device memory sub-stages may fill together (the rest: allocator slack, buffers)."""

ChainKey = tuple[str, int, int | None]
"""(pipeline, step, worker): a rollout worker's chain, or (worker None) a step's training chain."""


@dataclass(frozen=True, slots=True)
class JigsawOptions:
    lookahead: bool = True
    colocate: bool = False
    """The dynamic split. Off by default: under the modelled interference table it cost
    throughput on every built-in mix (``jigsaw-with-split`` in ``jigsaw bench``), even gated by
    the look-ahead; turn it on with a measured table that says otherwise."""
    resize: bool = True
    widen: bool = True
    """Training chains also take devices left idle, up to twice their width."""
    take_turns: bool = True
    """Like pipelines (same model, task and layout, all synchronous) take turns to train on a
    wide group while the others roll out on one worker each
    (:class:`~jigsaw_engine.sched.jigsaw.turns.Turns`); chosen by the look-ahead only when it
    projects a shorter step."""
    rollout_only: bool = False
    """Multiplex rollout sub-stages only (idle devices lent to rollout workers): training chains
    stay on their home, never widened nor beside a tail."""
    tail_share: float = 0.3
    max_slowdown: float = 1.5
    """Look-ahead resize: a pipeline gives devices to one projected to finish later only while
    its own projected step time stays within this factor of its time on what it asked for."""


def is_tail(node: SubStage) -> bool:
    return node.kind is SubStageKind.DECODE and node.bucket == "tail"


def ready_chain_s(view: ClusterView, task: Task) -> float:
    """The predicted chain length of the ready stage ``task`` was made from."""
    for stage in view.ready:
        if stage.pipeline_id == task.pipeline_id and stage.node.node_id == task.node.node_id:
            return stage.chain_s
    return task.node.duration_s


def widened(node: SubStage, width: int) -> SubStage:
    """``node`` data-parallel over ``width`` devices: log-probs and updates scale with the
    devices (as the cost model's ``train_s``), the weight broadcast does not; state per device shrinks."""
    scale = node.devices / width
    duration = node.duration_s if node.kind is SubStageKind.WEIGHT_SYNC else node.duration_s * scale
    return replace(node, devices=width, duration_s=duration, mem_bytes=node.mem_bytes * scale)
