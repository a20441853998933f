"""The forecast breakdown of `jigsaw run`: where a pipeline's seconds went, by sub-stage kind."""

from jigsaw_engine.control.run_record import TimelineSpan
from jigsaw_engine.real.run import stage_seconds


def span(pid: str, kind: str, start: float, end: float, worker: int | None = None) -> TimelineSpan:
    return TimelineSpan(pid, kind, None, 0, worker, (0,), start, end, 1.0)


def test_rollout_kinds_are_summed_together_and_workers_add_up() -> None:
    timeline = [
        span("a", "prefill", 0.0, 0.5, worker=0),
        span("a", "decode", 0.5, 2.0, worker=0),
        span("a", "decode", 0.5, 1.5, worker=1),  # a second worker at the same time
        span("a", "tool", 2.0, 2.25, worker=0),
        span("a", "train", 2.25, 3.0),
        span("b", "train", 0.0, 4.0),
    ]
    assert stage_seconds(timeline) == {"a": {"rollout": 3.25, "train": 0.75}, "b": {"train": 4.0}}
