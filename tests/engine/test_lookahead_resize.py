"""Look-ahead resize: widths chosen from projected completion times, worked out by hand."""

from __future__ import annotations

import pytest

from jigsaw_engine.bench.mixes import build_long_mix, build_mix
from jigsaw_engine.bench.simulate import POLICIES, prepare, run_policy
from jigsaw_engine.contracts import PipelineState
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.sched.jigsaw.projection import Demand, StepProfile, balanced_widths, fair_floor
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler
from jigsaw_engine.spec.workload_file import WorkloadFile, parse_workload
from tests.engine.builders import make_cluster, make_cost, make_spec


def test_an_async_step_overlaps_rollout_with_training() -> None:
    # serial 30 s (sync 2 s of it), 40 device-seconds of training on 4 devices = 10 s.
    # sync: 30 + 10 = 40 s; lag 1: max((30 + 10) / 2, 10 + 2) = 20 s; lag 4: max(8, 12) = 12 s.
    assert StepProfile(30.0, 40.0).step_s(4) == pytest.approx(40.0)
    assert StepProfile(30.0, 40.0, lag=1, sync_s=2.0).step_s(4) == pytest.approx(20.0)
    assert StepProfile(30.0, 40.0, lag=4, sync_s=2.0).step_s(4) == pytest.approx(12.0)


def test_fair_floor_keeps_a_step_within_the_slowdown_bound() -> None:
    # serial 10 s, 80 device-seconds: 30 s on the 4 devices asked for, so at most 45 s at
    # 1.5x: 10 + 80 / w <= 45 needs w >= 2.29, so 3 devices (2 would take 50 s).
    assert fair_floor(StepProfile(10.0, 80.0), asked=4, tp=1, max_slowdown=1.5) == 3
    # tp 2: widths come in pairs, so 4 (the floor never exceeds what was asked).
    assert fair_floor(StepProfile(10.0, 80.0), asked=4, tp=2, max_slowdown=1.5) == 4
    # Light training (8 device-seconds: 12 s on 4, 18 s on 1) can go down to one device.
    assert fair_floor(StepProfile(10.0, 8.0), asked=4, tp=1, max_slowdown=1.5) == 1


def test_devices_go_to_the_pipeline_projected_to_finish_last() -> None:
    # 8 devices, 10 steps left each. A: serial 10 s + 80 device-seconds of training; B: serial
    # 10 s + 8. On what they asked for (4 each) A ends in 10 x (10 + 80/4) = 300 s and B in
    # 10 x (10 + 8/4) = 120 s: the mix takes 300 s. From the floors (A 3, B 1, as above) each
    # device goes to whoever is projected last: A at 3 -> 366.7 s, so A takes 4 (300), 5 (260),
    # 6 (233.3), 7 (214.3), and the cluster is used up. B on 1 device: 10 x 18 = 180 s, within
    # its 1.5x bound. The mix now ends at 214.3 s instead of 300 s.
    demands = {
        "a": Demand(steps_left=10, profile=StepProfile(10.0, 80.0), width=4, floor=3, tp=1),
        "b": Demand(steps_left=10, profile=StepProfile(10.0, 8.0), width=4, floor=1, tp=1),
    }
    widths = balanced_widths(demands, 8)
    assert widths == {"a": 7, "b": 1}
    assert demands["a"].remaining_s(7) == pytest.approx(214.2857, rel=1e-5)
    assert demands["b"].remaining_s(1) == pytest.approx(180.0)
    assert max(d.remaining_s(4) for d in demands.values()) == pytest.approx(300.0)


def test_a_pipeline_without_a_profile_keeps_its_width_and_spare_devices_stay_unassigned() -> None:
    # C was never observed: it keeps its 4. A (5 steps of 0 + 2/w s) is projected at 10/w s:
    # 1 device -> 10 s, 2 -> 5 s (5 s sooner), 3 -> 3.33 s (1.67 s), 4 -> 2.5 s (0.83 s: under
    # a second, not worth a device). A stops at 3 and the last device stays unassigned.
    demands = {
        "a": Demand(steps_left=5, profile=StepProfile(0.0, 2.0), width=4, floor=1, tp=1),
        "c": Demand(steps_left=10, profile=None, width=4, floor=1, tp=1),
    }
    assert balanced_widths(demands, 8) == {"a": 3, "c": 4}


def test_look_ahead_moves_devices_to_the_pipeline_that_ends_last_and_beats_greedy() -> None:
    # M2 (16 H100s, math 7B, search 3B, code-tool 7B, GSM8K 1.5B), 6 steps. Greedy resizes
    # homes in proportion to what was asked; look-ahead gives the pipeline projected to end
    # last more devices, taken from pipelines with time to spare (each within 1.5x of its own
    # step time), and the mix ends sooner.
    workload = build_mix("M2")
    specs = prepare(workload, steps=6, seed=0)
    runs = {p: run_policy(POLICIES[p], workload.cluster, specs) for p in ("jigsaw", "greedy")}
    makespan = {p: r.makespan_s for p, r in runs.items()}
    print(f"makespan: jigsaw {makespan['jigsaw']:.0f} s, greedy {makespan['greedy']:.0f} s")
    assert makespan["jigsaw"] < 0.97 * makespan["greedy"]
    widths: dict[str, set[int]] = {}
    for span in runs["jigsaw"].controller.timeline:
        if span.kind == "prefill":
            widths.setdefault(span.pipeline_id, set()).add(span.worker or 0)
    asked = {pid: s.resources.num_gpus // s.resources.tp for pid, s in specs.items()}
    workers = {pid: len(w) for pid, w in widths.items()}
    assert any(workers[p] > asked[p] for p in asked), (workers, asked)  # some home grew past its ask


@pytest.mark.parametrize("policy", ["jigsaw", "greedy"])
def test_real_pipelines_never_train_wider_than_their_step(policy: str) -> None:
    """A real pipeline's update runs in one process: a training chain widened onto more
    devices than its step's rollout workers would hold cores it cannot use. With
    ``real_pipelines`` no update is wider than its step, though the same run widens without
    it (the spare devices are there)."""
    cluster = make_cluster(4)

    def widest_update_over_step(real_pipelines: bool) -> float:
        controller = ClusterController(
            cluster,
            make_cost(),
            scheduler=make_scheduler(policy, cluster, make_cost(), real_pipelines=real_pipelines),
            graph_config=graph_config_for(policy),
        )
        controller.submit("a", make_spec(resources={"num_gpus": 1}, trainer={"total_steps": 4}))
        controller.run_until_idle()
        assert controller.state_of("a") is PipelineState.SUCCEEDED
        workers: dict[int, set[int]] = {}
        for span in controller.timeline:
            if span.worker is not None:
                workers.setdefault(span.step, set()).add(span.worker)
        return max(len(s.devices) / len(workers[s.step]) for s in controller.timeline if s.kind == "train")

    assert widest_update_over_step(real_pipelines=False) > 1
    assert widest_update_over_step(real_pipelines=True) == 1


def _long_response_mix() -> WorkloadFile:
    """8 H100s; 8 responses per prompt up to 16,384 tokens. The 14B AIME pipeline asked for 2
    devices: its first step outlasts both math pipelines' whole runs, so from its second step
    on it is alone with 8 devices."""
    pipelines = [
        make_spec(
            name=f"{workload}-{model}",
            model=model,
            workload=workload,
            data={"train_batch_size": 64},
            rollout={"n": 8, "max_response_length": 16384},
            resources={"num_gpus": gpus},
            seed=i + 1,
        )
        for i, (workload, model, gpus) in enumerate(
            [("math", "qwen3-0.6b", 2), ("aime_refine", "deepseek-r1-distill-qwen-14b", 2), ("math", "qwen2.5-7b", 4)]
        )
    ]
    return parse_workload(
        {"cluster": {"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"}, "pipelines": pipelines}
    )


def test_a_pipeline_left_alone_takes_every_device_it_is_projected_to_gain_from() -> None:
    # Its profile projects each step shorter on every device more (its training is data
    # parallel), and no other pipeline is left to use one: the look-ahead takes all 8 at once,
    # as greedy does, where growing only by doubling cost its second step a third of its
    # length on 4.
    workload = _long_response_mix()
    specs = prepare(workload, steps=2, seed=0)
    runs = {p: run_policy(POLICIES[p], workload.cluster, specs) for p in ("jigsaw", "greedy")}
    workers: dict[int, set[int]] = {}
    for span in runs["jigsaw"].controller.timeline:
        if span.pipeline_id == "p1" and span.worker is not None:
            workers.setdefault(span.step, set()).add(span.worker)
    assert {step: len(w) for step, w in workers.items()} == {0: 2, 1: 8}
    makespan = {p: r.makespan_s for p, r in runs.items()}
    print(f"makespan: jigsaw {makespan['jigsaw']:.0f} s, greedy {makespan['greedy']:.0f} s")
    assert makespan["jigsaw"] <= makespan["greedy"]


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_look_ahead_never_loses_to_greedy_on_long_response_mixes(seed: int) -> None:
    # The first steps of drawn long-response mixes, where a large model on few devices ends
    # long after the rest and the devices they leave behind go to it.
    workload = build_long_mix(seed)
    specs = prepare(workload, steps=3, seed=0)
    makespan = {p: run_policy(POLICIES[p], workload.cluster, specs).makespan_s for p in ("jigsaw", "greedy")}
    print(f"long-response mix {seed}: jigsaw {makespan['jigsaw']:.0f} s, greedy {makespan['greedy']:.0f} s")
    assert makespan["jigsaw"] <= makespan["greedy"] * (1 + 1e-9)  # the same schedule, summed in another order
