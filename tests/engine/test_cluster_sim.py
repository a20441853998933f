"""The multi-pipeline simulator: SimRuntime bookkeeping, the controller's invariants under
each policy, and the lower bound that no policy may beat."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import pytest

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.simulate import POLICIES, Policy, prepare, run_policy, simulate_workload, workload_lower_bound
from jigsaw_engine.control.run_record import TimelineSpan
from jigsaw_engine.graph.substage import ResourceClass, SubStage, SubStageKind
from jigsaw_engine.sched.dedicated import DedicatedScheduler
from jigsaw_engine.sim.sim_runtime import SimRuntime
from jigsaw_engine.spec.workload_file import parse_workload
from jigsaw_engine.tasks import Task
from tests.engine.builders import make_spec

ROLLOUT = {"prefill", "decode"}
TRAINING = {"old_logprob", "ref_logprob", "train", "weight_sync"}


def node(duration_s: float, name: str = "n") -> SubStage:
    return SubStage(name, SubStageKind.TRAIN, 0, None, None, 1, 0.0, ResourceClass.COMPUTE, duration_s)


def test_sim_runtime_shares_devices_and_finishes_in_order() -> None:
    # Two compute-bound halves of one device: each runs at 1/2.1 of full speed (half the SMs,
    # x1.05 co-run overhead in the interference table); once b ends, a runs alone at 1/2.
    rt = SimRuntime(2)
    rt.start(Task("a", node(4.0, "a"), (0,), share=0.5))
    rt.start(Task("b", node(3.0, "b"), (0,), share=0.5))
    with pytest.raises(ValueError, match="already 100% busy"):
        rt.start(Task("c", node(1.0, "c"), (0,), share=0.1))
    with pytest.raises(ValueError, match="device 5 does not exist"):
        rt.start(Task("d", node(1.0, "d"), (5,)))
    assert rt.next_event_s() == pytest.approx(6.3)
    done = rt.advance_to(100.0)
    assert [(f.task.pipeline_id, round(f.end_s, 6)) for f in done] == [("b", 6.3), ("a", 8.3)]
    assert rt.device_load() == {}


def test_memory_bound_tail_beside_training_costs_each_less_than_taking_turns() -> None:
    tail = SubStage("tail", SubStageKind.DECODE, 0, 0, "tail", 1, 0.0, ResourceClass.MEMORY, 10.0)
    rt = SimRuntime(1)
    rt.start(Task("a", tail, (0,), share=0.3))
    assert rt.rate_of("a/tail") == pytest.approx(1.0)  # a tail needs few SMs: alone on 30% it runs at full speed
    rt.start(Task("b", node(10.0, "train"), (0,), share=0.7))
    done = rt.advance_to(100.0)
    ends = {f.task.pipeline_id: f.end_s for f in done}
    # Table: memory 0.3 beside compute 0.7 -> 1.1655 / 1.665; compute alone on 0.7 -> 1.4286.
    assert ends["a"] == pytest.approx(11.655)
    assert ends["b"] == pytest.approx(11.655 + (10.0 - 11.655 / 1.665) * 1.4286)
    assert max(ends.values()) < 20.0  # sooner than one after the other


def spans_by_pipeline(spans: list[TimelineSpan]) -> dict[str, list[TimelineSpan]]:
    out: dict[str, list[TimelineSpan]] = defaultdict(list)
    for s in spans:
        out[s.pipeline_id].append(s)
    return out


@pytest.mark.parametrize("policy", ["verl-dedicated", "verl-serial"])
def test_verl_never_overlaps_a_pipelines_rollout_with_its_training(policy: str) -> None:
    workload = build_mix("M2")
    run = run_policy(POLICIES[policy], workload.cluster, prepare(workload, steps=3, seed=0))
    for spans in spans_by_pipeline(run.controller.timeline).values():
        rollout = [s for s in spans if s.kind in ROLLOUT]
        training = [s for s in spans if s.kind in TRAINING]
        assert rollout and training
        for r in rollout:
            for t in training:
                assert r.end_s <= t.start_s or t.end_s <= r.start_s, (r, t)


def test_no_device_runs_two_tasks_at_full_share() -> None:
    workload = build_mix("M0")
    run = run_policy(POLICIES["verl-dedicated"], workload.cluster, prepare(workload, steps=2, seed=0))
    by_device: dict[int, list[TimelineSpan]] = defaultdict(list)
    for span in run.controller.timeline:
        for d in span.devices:
            by_device[d].append(span)
    for spans in by_device.values():
        spans.sort(key=lambda s: s.start_s)
        for a, b in pairwise(spans):
            assert a.end_s <= b.start_s + 1e-9


@pytest.mark.parametrize("staleness", [1, 3])
def test_async_rollouts_never_run_further_ahead_than_the_staleness_bound(staleness: int) -> None:
    # Step s may start its rollout only once the weights of step s - staleness - 1 are synced.
    spec = make_spec(mode="async", staleness=staleness, trainer={"total_steps": 6}, workload="math",
                     resources={"num_gpus": 4, "rollout_gpus": 2})  # fmt: skip
    raw = {"cluster": {"devices_per_node": 4}, "pipelines": [spec]}
    workload = parse_workload(raw)
    as_submitted = Policy("as-submitted", DedicatedScheduler)
    run = run_policy(as_submitted, workload.cluster, prepare(workload, steps=None, seed=0))
    spans = run.controller.timeline
    synced = {s.step: s.end_s for s in spans if s.kind == "weight_sync"}
    first_rollout = {}
    for s in spans:
        if s.kind in ROLLOUT:
            first_rollout[s.step] = min(first_rollout.get(s.step, s.start_s), s.start_s)
    assert sorted(synced) == list(range(6))
    for step, start in first_rollout.items():
        if step - staleness - 1 >= 0:
            assert start >= synced[step - staleness - 1]
    # ... and it does run ahead: some rollout starts before the previous step has synced.
    assert any(start < synced[step - 1] for step, start in first_rollout.items() if step >= 1)


@pytest.mark.parametrize("mix", ["M0", "M1", "M2", "M3", "M5"])
def test_no_policy_beats_the_lower_bound(mix: str) -> None:
    policies = list(POLICIES)
    result = simulate_workload(build_mix(mix), policies, steps=3, seed=0, timing=False)
    for name, r in result["policies"].items():
        assert 0 < r["lower_bound_ratio"] <= 1.0, (mix, name, r["lower_bound_ratio"])
        assert r["gpu_time_breakdown"]["idle"] >= -1e-9
        assert sum(r["gpu_time_breakdown"].values()) == pytest.approx(1.0)
    assert result["lower_bound"]["roofline_s"] <= result["lower_bound"]["practical_s"]


def test_verl_reports_the_better_of_its_two_deployments() -> None:
    result = simulate_workload(
        build_mix("M0"), ["verl", "verl-dedicated", "verl-serial"], steps=2, seed=0, timing=False
    )
    p = result["policies"]
    best = max(p["verl-dedicated"]["throughput_tokens_per_s"], p["verl-serial"]["throughput_tokens_per_s"])
    assert p["verl"]["throughput_tokens_per_s"] == best
    assert p["verl"]["chosen"] in ("verl-dedicated", "verl-serial")


def test_dedicated_latency_matches_running_alone() -> None:
    # On a dedicated partition nothing else touches a pipeline's devices: ratio exactly 1.
    result = simulate_workload(build_mix("M1"), ["verl-dedicated"], steps=2, seed=0, timing=False)
    ratios = [p["latency_ratio_vs_alone"] for p in result["policies"]["verl-dedicated"]["pipelines"].values()]
    assert ratios == pytest.approx([1.0] * 4)


def test_bound_and_runs_use_the_same_sampled_rollouts() -> None:
    workload = build_mix("M3")
    specs = prepare(workload, steps=2, seed=5)
    assert (
        workload_lower_bound(workload.cluster, specs).practical_s
        == workload_lower_bound(workload.cluster, prepare(workload, steps=2, seed=5)).practical_s
    )


def test_streamrl_pools_never_share_a_device_and_overlap_across_steps() -> None:
    workload = build_mix("M5")
    run = run_policy(POLICIES["streamrl-dedicated"], workload.cluster, prepare(workload, steps=4, seed=0))
    disaggregated = {pid for pid, spec in run.specs.items() if spec.resources.rollout_gpus}
    assert disaggregated, "the split search chose no disaggregated layout at all"
    overlapped = False
    for pid, spans in spans_by_pipeline(run.controller.timeline).items():
        if pid not in disaggregated:
            continue
        rollout_devices = {d for s in spans if s.kind in ROLLOUT for d in s.devices}
        training_devices = {d for s in spans if s.kind in TRAINING for d in s.devices}
        assert rollout_devices and training_devices and not rollout_devices & training_devices
        rollouts = [s for s in spans if s.kind in ROLLOUT]
        trains = [s for s in spans if s.kind == "train"]
        overlapped |= any(
            r.step == t.step + 1 and r.start_s < t.end_s and t.start_s < r.end_s for r in rollouts for t in trains
        )
    assert overlapped  # staleness 1: step s + 1 generates while step s trains


def test_verl_runs_async_mixes_synchronously() -> None:
    workload = build_mix("M5")
    run = run_policy(POLICIES["verl-dedicated"], workload.cluster, prepare(workload, steps=2, seed=0))
    assert all(spec.staleness == 0 and spec.mode.value == "sync" for spec in run.specs.values())


def test_rollmux_multiplexes_jobs_on_two_pools_with_warm_switches() -> None:
    workload = build_mix("M3")
    run = run_policy(POLICIES["rollmux"], workload.cluster, prepare(workload, steps=3, seed=0))
    spans = run.controller.timeline
    rollout_devices = {d for s in spans if s.kind in ROLLOUT for d in s.devices}
    training_devices = {d for s in spans if s.kind in TRAINING for d in s.devices}
    assert rollout_devices and training_devices and not rollout_devices & training_devices
    # Several jobs use the same pool devices over time (that is the multiplexing) ...
    users: dict[int, set[str]] = defaultdict(set)
    for s in spans:
        for d in s.devices:
            users[d].add(s.pipeline_id)
    assert any(len(u) > 1 for u in users.values())


def test_rollmux_charges_a_warm_switch_only_when_another_job_held_the_devices() -> None:
    from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
    from jigsaw_engine.sched.rollmux import CoExecutionGroup, RollMuxScheduler
    from jigsaw_engine.spec import parse_pipeline_spec
    from tests.engine.builders import make_cost

    cost = make_cost()
    specs = {p: parse_pipeline_spec(make_spec(resources={"num_gpus": 4, "rollout_gpus": 2})) for p in ("a", "b")}
    sched = RollMuxScheduler([CoExecutionGroup(("a", "b"), (0, 1, 2, 3), 2)], cost)
    train = SubStage("s0/old_logprob", SubStageKind.OLD_LOGPROB, 0, None, None, 2, 0.0, ResourceClass.COMPUTE, 5.0)

    def start(pid: str) -> Task:
        view = ClusterView(0.0, 4, {}, (ReadyStage(pid, train),), specs, ())
        (task,) = sched.decide(view)
        return task

    first, again, other = start("a"), start("a"), start("b")
    assert first.devices == (2, 3)  # the training pool
    # 16 bytes x 1.54e9 parameters over 2 x 50 GB/s of PCIe, plus 0.5 s of wake-up = 0.746 s.
    assert first.setup_s == pytest.approx(16 * 1.54e9 / (2 * 50e9) + 0.5)
    assert again.setup_s == 0.0  # a's state is still resident
    assert other.setup_s == pytest.approx(first.setup_s)  # b replaces a


def test_areal_never_exceeds_its_staleness_and_generates_across_steps() -> None:
    workload = build_mix("M5", variant="areal")  # staleness 4
    run = run_policy(POLICIES["areal-dedicated"], workload.cluster, prepare(workload, steps=8, seed=0))
    assert all(spec.staleness == 4 for spec in run.specs.values())
    continued = False
    for spans in spans_by_pipeline(run.controller.timeline).values():
        synced = {s.step: s.end_s for s in spans if s.kind == "weight_sync"}
        for r in (s for s in spans if s.kind in ROLLOUT):
            if r.step - 5 >= 0:
                assert r.start_s >= synced[r.step - 5] - 1e-9, r  # rollout of s needs the weights of s - 5
        # Continuous generation: a worker's next step begins while its tail still decodes there.
        tails = [s for s in spans if s.kind == "decode" and s.bucket == "tail"]
        continued |= any(
            n.step == t.step + 1
            and n.worker == t.worker
            and n.start_s < t.end_s - 1e-9
            and set(n.devices) & set(t.devices)
            for t in tails
            for n in spans
            if n.kind in ROLLOUT
        )
        # Interruptible rollouts pay a re-prefill of what is in flight at each weight update.
        assert any(s.kind == "prefill" and s.bucket == "interrupt" for s in spans)
    assert continued


def test_areal_keeps_sync_pipelines_synchronous() -> None:
    workload = build_mix("M3")  # every pipeline sync
    run = run_policy(POLICIES["areal-dedicated"], workload.cluster, prepare(workload, steps=2, seed=0))
    assert all(spec.mode.value == "sync" for spec in run.specs.values())
    assert not any(s.bucket == "interrupt" for s in run.controller.timeline)


def test_muxserve_shares_devices_between_rollouts_but_never_during_training() -> None:
    from jigsaw_engine.control.cluster_controller import ClusterController
    from jigsaw_engine.sched.muxserve import MuxGroup, MuxServeScheduler
    from jigsaw_engine.spec.cluster import ClusterSpec
    from tests.engine.builders import make_cost

    cost = make_cost()
    group = MuxGroup(("a", "b"), (0, 1))
    controller = ClusterController(ClusterSpec(1, 2, "h100"), cost, scheduler=MuxServeScheduler([group], cost))
    for pid, seed in (("a", 1), ("b", 2)):
        controller.submit(pid, make_spec(seed=seed, trainer={"total_steps": 3}, resources={"num_gpus": 2}))
    controller.run_until_idle()
    assert set(controller.finished_runs()) == {"a", "b"}
    spans = [s for s in controller.timeline if s.devices]
    shared_rollouts = False
    for a in spans:
        for b in spans:
            if (
                a is b
                or not set(a.devices) & set(b.devices)
                or not (a.start_s < b.end_s - 1e-9 and b.start_s < a.end_s - 1e-9)
            ):
                continue
            assert a.kind in ROLLOUT and b.kind in ROLLOUT, (a, b)  # training is exclusive
            shared_rollouts |= a.pipeline_id != b.pipeline_id
    assert shared_rollouts
