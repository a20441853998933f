"""Predicting the next step's graph from the steps a pipeline has run (temporal consistency).

Consecutive RL steps look alike: the same prompts per step, slowly drifting lengths. So the
next step's sub-stage durations are predicted per node role (kind, worker, bucket) as an
exponential moving average of what was observed. A role never seen, or a prediction that
missed badly, falls back to a fresh estimate from the cost model, so one surprising step
(lengths jumping late in training) corrects itself within a step or two.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from jigsaw_engine.graph.substage import SubStage, SubStageGraph

Role = tuple[str, int | None, str | None]


def role_of(node: SubStage) -> Role:
    return (node.kind.value, node.worker, node.bucket)


@dataclass(slots=True)
class GraphPredictor:
    alpha: float = 0.5
    """Weight of the newest observation: high enough to follow drifting lengths within a few
    steps, low enough to average out one step's sampling noise."""
    reset_error: float = 0.5
    """A relative error above this discards the history of that role (the workload changed)."""
    _estimates: dict[Role, float] = field(default_factory=dict)
    last_errors: dict[Role, float] = field(default_factory=dict)
    """Relative error of the last prediction per role (0.1 = 10% off)."""

    def observe(self, observed: SubStageGraph) -> None:
        errors: dict[Role, float] = {}
        for node in observed.nodes:
            role = role_of(node)
            previous = self._estimates.get(role)
            if previous is None or node.duration_s == 0:
                self._estimates[role] = node.duration_s
                continue
            error = abs(previous - node.duration_s) / node.duration_s
            errors[role] = error
            if error > self.reset_error:
                self._estimates[role] = node.duration_s
            else:
                self._estimates[role] = self.alpha * node.duration_s + (1 - self.alpha) * previous
        self.last_errors = errors

    def predict(self, template: SubStageGraph) -> SubStageGraph:
        """``template`` (a cost-model estimate of the next step) with observed durations."""
        nodes = tuple(replace(n, duration_s=self._estimates.get(role_of(n), n.duration_s)) for n in template.nodes)
        return replace(template, nodes=nodes)

    def duration_of(self, node: SubStage) -> float | None:
        """The predicted duration of ``node``'s role, or None if the role was never observed."""
        return self._estimates.get(role_of(node))
