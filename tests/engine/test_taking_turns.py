"""Taking turns: like synchronous pipelines roll out narrow and train wide, one after another.

The look-ahead's plan is worked by hand on a small case; on M1 (four 7B math jobs on 8 H100s)
the turns are seen in the timeline and pay against the same scheduler without them; on a mix
of unlike pipelines (M2) nothing changes.
"""

from __future__ import annotations

import itertools

import pytest

from jigsaw_engine.bench.simulate import POLICIES, prepare, run_policy
from jigsaw_engine.sched.jigsaw import JigsawScheduler
from jigsaw_engine.sched.projection import StepProfile
from jigsaw_engine.sched.protocol import ClusterView
from jigsaw_engine.spec.mixes import build_mix
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from tests.engine.builders import make_cluster, make_cost, make_spec


def _scheduler_with_profiles(
    profile: StepProfile, names: tuple[str, ...], devices: int, specs: dict[str, PipelineSpec]
) -> JigsawScheduler:
    scheduler = JigsawScheduler(make_cluster(devices), make_cost())
    view = ClusterView(0.0, devices, {}, (), specs, tuple(names))
    scheduler.admit(view, specs)
    for name in names:
        scheduler._profile[name] = profile  # as observed after their first step
    return scheduler


def test_the_plan_takes_the_turns_that_step_soonest_worked_by_hand() -> None:
    # Two alike pipelines on 4 devices, homes of 2. Observed: 20 s serial (the rollout, then a
    # 2 s weight sync) and 40 device-seconds of training, so 20 + 40 / 2 = 40 s a step at home.
    # Taking turns (each rolls out on 1 device, trains on w; s at a time):
    #   s = 1 needs w + 1 <= 4: w = 3 trains in 40 / 3 + 2 = 15.3 s, and a step takes
    #   max(18 + 15.3, 2 x 15.3) = 33.3 s; w = 2: max(18 + 22, 2 x 22) = 44 s.
    #   s = 2 needs 2w <= 4: w = 2: max(40, 22) = 40 s.
    # Best: one at a time on 3 devices, 33.3 s, more than 5% sooner than 40 s: taken.
    specs = {n: parse_pipeline_spec(make_spec(name=n)) for n in ("a", "b")}
    scheduler = _scheduler_with_profiles(StepProfile(20.0, 40.0, sync_s=2.0), ("a", "b"), 4, specs)
    view = ClusterView(30.0, 4, {}, (), specs, ())
    turns = scheduler._plan_turns(view)
    assert turns is not None
    assert (turns.width, turns.at_once) == (3, 1)
    assert turns.period_s == pytest.approx(18 + 40 / 3 + 2)
    # A step of a pipeline taking turns has one rollout worker (its training is widened when placed).
    assert scheduler.resources_for_step(view, "a", 1).num_gpus == 1


def test_no_turns_for_unlike_pipelines_or_when_they_would_not_pay() -> None:
    light = StepProfile(20.0, 4.0, sync_s=2.0)  # training 2 s at home: turns cannot shorten 22 s by 5%
    specs = {n: parse_pipeline_spec(make_spec(name=n)) for n in ("a", "b")}
    scheduler = _scheduler_with_profiles(light, ("a", "b"), 4, specs)
    assert scheduler._plan_turns(ClusterView(30.0, 4, {}, (), specs, ())) is None
    unlike = {"a": specs["a"], "b": parse_pipeline_spec(make_spec(name="b", workload="math"))}
    scheduler = _scheduler_with_profiles(StepProfile(20.0, 40.0, sync_s=2.0), ("a", "b"), 4, unlike)
    assert scheduler._plan_turns(ClusterView(30.0, 4, {}, (), unlike, ())) is None


def test_on_m1_the_jobs_take_turns_to_train_wide_and_the_mix_ends_sooner() -> None:
    workload = build_mix("M1")
    # 12 steps: the first two run at home (before a step is observed), and the first turns
    # stagger four pipelines that all start rolling out together.
    specs = prepare(workload, steps=12, seed=0)
    runs = {p: run_policy(POLICIES[p], workload.cluster, specs) for p in ("jigsaw", "jigsaw-no-turns")}
    with_turns, without = runs["jigsaw"].makespan_s, runs["jigsaw-no-turns"].makespan_s
    print(f"M1, 12 steps: {with_turns:.0f} s taking turns, {without:.0f} s without")
    assert with_turns < 0.97 * without
    spans = runs["jigsaw"].controller.timeline
    later = [s for s in spans if s.step >= 2]  # the first steps run at home, before a step was observed
    rollout_devices = {len(s.devices) for s in later if s.kind in ("prefill", "decode")}
    assert rollout_devices == {1}  # one worker, one device each
    trainings = [s for s in later if s.kind == "train"]
    # Its own device and the 4 no one rolls out on, and the devices of jobs waiting for a later turn.
    assert min(len(s.devices) for s in trainings) == 5
    assert max(len(s.devices) for s in trainings) > 5
    # One at a time: a step's updates end before another pipeline's begin.
    turns: dict[tuple[str, int], tuple[float, float]] = {}
    for s in trainings:
        start, end = turns.get((s.pipeline_id, s.step), (s.start_s, s.end_s))
        turns[(s.pipeline_id, s.step)] = (min(start, s.start_s), max(end, s.end_s))
    spans_in_order = sorted(turns.values())
    assert len(spans_in_order) == 4 * 10
    for (_, end), (next_start, _) in itertools.pairwise(spans_in_order):
        assert next_start >= end - 1e-6


def test_unlike_pipelines_run_exactly_as_without_turns() -> None:
    workload = build_mix("M2")
    specs = prepare(workload, steps=4, seed=0)
    runs = {p: run_policy(POLICIES[p], workload.cluster, specs) for p in ("jigsaw", "jigsaw-no-turns")}
    assert runs["jigsaw"].makespan_s == runs["jigsaw-no-turns"].makespan_s
