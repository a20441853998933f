"""Roll-forward predictions for schedulers that ask for them (``uses_predictions``): how long
a chain still runs, and when a step's rollout ends, on durations predicted from the pipeline's
recent steps (:class:`~jigsaw_engine.graph.predict.GraphPredictor`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping

from jigsaw_engine.graph.predict import GraphPredictor
from jigsaw_engine.graph.substage import SubStage, SubStageGraph
from jigsaw_engine.tasks import Task


class OnDemand(Mapping[str, float]):
    """A mapping whose values are computed on first read: ``ClusterView.rollout_done_s`` costs a
    roll-forward per pipeline, and a scheduler reads it for the few pipelines it considers
    lending devices of, not at every event for all of them. Read only while the view is current
    (during the scheduler call it was passed to)."""

    def __init__(self, keys: list[str], compute: Callable[[str], float | None]) -> None:
        self._keys = keys
        self._known = set(keys)
        self._compute = compute
        self._values: dict[str, float | None] = {}
        """What each key read so far came to (None: no value)."""

    def _value(self, key: str) -> float | None:
        if key not in self._values:
            self._values[key] = self._compute(key) if key in self._known else None
        return self._values[key]

    def __getitem__(self, key: str) -> float:
        value = self._value(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._value(key) is not None

    def __iter__(self) -> Iterator[str]:
        return (key for key in self._keys if self._value(key) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def predicted_s(predictor: GraphPredictor, node: SubStage) -> float:
    """What a scheduler may know of ``node``'s duration before it runs: the pipeline's recent
    steps (per role, :class:`GraphPredictor`). A role never observed (the first step, a new
    worker after a resize) falls back to the graph's estimate, which in the simulator is
    built from the sampled lengths themselves."""
    predicted = predictor.duration_of(node)
    return node.duration_s if predicted is None else predicted


def chain_s(predictor: GraphPredictor, graph: SubStageGraph, node: SubStage) -> float:
    """Predicted time of ``node`` and the rest of its chain (its worker's, or the step's training)."""
    chain = graph.of_worker(node.worker) if node.worker is not None else graph.pipeline_wide()
    rest = chain[chain.index(node) :]
    return sum(predicted_s(predictor, n) for n in rest if n.devices > 0)


def rollout_eta(
    pid: str,
    predictor: GraphPredictor,
    graph: SubStageGraph,
    done: Container[tuple[int, str]],
    now_s: float,
    started_s: Mapping[str, float],
    running: Mapping[str, Task],
) -> float | None:
    """When ``graph``'s last rollout worker should finish, rolling its chain forward from what
    runs now (``running``, started at ``started_s``, by task id) on predicted durations; None
    once every worker is ``done``."""
    latest = None
    workers = {n.worker for n in graph.nodes if n.worker is not None}
    for w in workers:
        t = now_s
        for n in graph.of_worker(w):
            key = (graph.step, n.node_id)
            if key in done or n.devices == 0:
                continue
            task_id = f"{pid}/{n.node_id}"
            if task_id in started_s:
                t = max(t, started_s[task_id] + running[task_id].setup_s + predicted_s(predictor, n))
            else:
                t += predicted_s(predictor, n)
        if any((graph.step, n.node_id) not in done for n in graph.of_worker(w) if n.devices > 0):
            latest = t if latest is None else max(latest, t)
    return latest
