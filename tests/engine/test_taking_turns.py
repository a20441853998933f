"""Taking turns: like synchronous pipelines roll out narrow and train wide, one after another.

The look-ahead's plan is worked by hand on a small case; on M1 (four 7B math jobs on 8 H100s)
the turns are seen in the timeline and pay against the same scheduler without them; on a mix
of unlike pipelines (M2) nothing changes. Each round's turns go in priority order, so the
pipeline of highest priority gets the lowest latency ratio (step latency over running alone),
turns or not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.simulate import POLICIES, PolicyRun, prepare, run_policy, simulate_workload
from jigsaw_engine.graph.substage import ResourceClass, SubStage, SubStageKind
from jigsaw_engine.sched.jigsaw import JigsawScheduler
from jigsaw_engine.sched.jigsaw.projection import StepProfile
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.spec.workload_file import parse_workload
from jigsaw_engine.tasks import Task
from tests.engine.builders import make_cluster, make_cost, make_spec


def _scheduler_with_profiles(
    profile: StepProfile, names: tuple[str, ...], devices: int, specs: dict[str, PipelineSpec]
) -> JigsawScheduler:
    scheduler = JigsawScheduler(make_cluster(devices), make_cost())
    view = ClusterView(0.0, devices, {}, (), specs, tuple(names))
    scheduler.admit(view, specs)
    for name in names:
        scheduler.homes.profiles[name] = profile  # as observed after their first step
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
    turns = scheduler.turns.plan(view)
    assert turns is not None
    assert (turns.width, turns.at_once) == (3, 1)
    assert turns.period_s == pytest.approx(18 + 40 / 3 + 2)
    # A step of a pipeline taking turns has one rollout worker (its training is widened when placed).
    assert scheduler.resources_for_step(view, "a", 1).num_gpus == 1


def test_no_turns_for_unlike_pipelines_or_when_they_would_not_pay() -> None:
    light = StepProfile(20.0, 4.0, sync_s=2.0)  # training 2 s at home: turns cannot shorten 22 s by 5%
    specs = {n: parse_pipeline_spec(make_spec(name=n)) for n in ("a", "b")}
    scheduler = _scheduler_with_profiles(light, ("a", "b"), 4, specs)
    assert scheduler.turns.plan(ClusterView(30.0, 4, {}, (), specs, ())) is None
    unlike = {"a": specs["a"], "b": parse_pipeline_spec(make_spec(name="b", workload="math"))}
    scheduler = _scheduler_with_profiles(StepProfile(20.0, 40.0, sync_s=2.0), ("a", "b"), 4, unlike)
    assert scheduler.turns.plan(ClusterView(30.0, 4, {}, (), unlike, ())) is None


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


def test_a_lower_priority_waits_for_the_turn_it_owes_a_higher_one() -> None:
    # The plan of the first test (one at a time on 3 of 4 devices; a rolls out on device 0, b on
    # device 2). a's training is ready while b still rolls out: with equal priorities a takes
    # its turn on 0, 1 and 3 at once; with b at priority 2, a waits for b's turn of this round,
    # though the devices are free. Once both are ready, b's turn goes first.
    def decide(b_priority: float, b_ready: bool) -> list[Task]:
        specs = {
            "a": parse_pipeline_spec(make_spec(name="a")),
            "b": parse_pipeline_spec(make_spec(name="b", priority=b_priority)),
        }
        scheduler = _scheduler_with_profiles(StepProfile(20.0, 40.0, sync_s=2.0), ("a", "b"), 4, specs)
        view = ClusterView(30.0, 4, {}, (), specs, (), progress={"a": (1, 3), "b": (1, 3)})
        assert all(scheduler.resources_for_step(view, p, 1).num_gpus == 1 for p in specs)  # both take turns
        train = SubStage("s1/old_logprob", SubStageKind.OLD_LOGPROB, 1, None, None, 1, 1e9, ResourceClass.COMPUTE, 1.0)
        decode = SubStage("s1/w0/decode.tail", SubStageKind.DECODE, 1, 0, "tail", 1, 1e9, ResourceClass.MEMORY, 9.0)
        ready = (ReadyStage("a", train, chain_s=40.0),) + ((ReadyStage("b", train, chain_s=40.0),) if b_ready else ())
        rolling = () if b_ready else (Task("b", decode, (2,)),)
        load = {} if b_ready else {2: 1.0}
        return scheduler.decide(replace(view, device_load=load, ready=ready, running=rolling))

    assert [(t.pipeline_id, t.devices) for t in decide(1.0, b_ready=False)] == [("a", (0, 1, 3))]
    assert decide(2.0, b_ready=False) == []
    assert [(t.pipeline_id, t.devices) for t in decide(2.0, b_ready=True)] == [("b", (0, 1, 2, 3))]


def _latency_ratios(
    pipelines: list[dict[str, Any]], on_run: Callable[[str, PolicyRun], None] = lambda n, r: None
) -> dict[str, dict[str, float]]:
    """Each policy's latency ratio per pipeline (``jigsaw bench``'s: step latency over running
    alone on what it asked for), on 8 H100s."""
    doc = {"cluster": {"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"}, "pipelines": pipelines}
    policies = ["jigsaw", "jigsaw-no-turns"]
    report = simulate_workload(parse_workload(doc), policies, steps=None, seed=0, timing=False, on_run=on_run)
    return {
        p: {n: r["latency_ratio_vs_alone"] for n, r in report["policies"][p]["pipelines"].items()} for p in policies
    }


def _job(name: str, model: str, workload: str, steps: int, priority: float = 1.0) -> dict[str, Any]:
    """A job as a user writes one (the default batch and lengths), on 2 devices."""
    return {
        "name": name,
        "model": model,
        "workload": workload,
        "resources": {"num_gpus": 2},
        "trainer": {"total_steps": steps},
        "priority": priority,
    }


def _alike(name: str, priority: float, model: str = "qwen2.5-7b", steps: int = 8) -> dict[str, Any]:
    """One of several jobs alike but for their names (the same model, task and sampled rollouts)."""
    return _job(name, model, "math", steps, priority)


@pytest.mark.parametrize("first", [0, 1, 2])
def test_the_alike_pipeline_of_highest_priority_gets_the_lowest_latency_ratio(first: int) -> None:
    # Three alike 7B jobs on 8 H100s, one at priority 4: they take turns (one worker each, then a
    # wide training), and whichever is listed, the prioritized one ends with the lowest ratio.
    pipelines = [_alike(n, 4.0 if i == first else 1.0) for i, n in enumerate("abc")]
    runs: dict[str, PolicyRun] = {}
    ratios = _latency_ratios(pipelines, on_run=runs.__setitem__)
    # They took turns: a home of 2 devices widens its training to 4 at most, a turn's is wider.
    assert min(len(s.devices) for s in runs["jigsaw"].controller.timeline if s.step >= 2 and s.kind == "train") > 4
    chosen = "abc"[first]
    for policy, ratio in ratios.items():
        assert ratio[chosen] < min(r for n, r in ratio.items() if n != chosen), (policy, ratio)


@pytest.mark.parametrize("priorities", [(1.0, 2.0, 4.0), (2.0, 4.0, 1.0), (4.0, 1.0, 2.0)])
def test_alike_pipelines_latency_ratios_follow_three_priority_levels(priorities: tuple[float, ...]) -> None:
    # Three alike 14B jobs, each at another priority: the higher the priority, the lower the ratio.
    pipelines = [_alike(n, p, model="qwen2.5-14b", steps=6) for n, p in zip("abc", priorities, strict=True)]
    for policy, ratio in _latency_ratios(pipelines).items():
        by_priority = [ratio[n] for _, n in sorted(zip(priorities, "abc", strict=True), reverse=True)]
        assert by_priority == sorted(by_priority) and len(set(by_priority)) == 3, (policy, ratio)


@pytest.mark.parametrize("priorities", [(4.0, 1.0, 1.0), (1.0, 4.0, 1.0), (2.0, 2.0, 1.0)])
def test_priority_holds_before_and_after_the_jobs_begin_to_take_turns(priorities: tuple[float, ...]) -> None:
    # Three alike 7B jobs and a short 1.5B one (listed last, at priority 1): nobody takes turns
    # until the short job ends, then the three do. The jobs of the highest priority end with
    # lower ratios than every other.
    pipelines = [_alike(n, p) for n, p in zip("abc", priorities, strict=True)]
    pipelines.append(_job("short", "qwen2.5-1.5b", "gsm8k", steps=4))
    top = {n for n, p in zip("abc", priorities, strict=True) if p == max(priorities)}
    for policy, ratio in _latency_ratios(pipelines).items():
        assert max(ratio[n] for n in top) < min(r for n, r in ratio.items() if n not in top), (policy, ratio)
