"""A real run on a GPU cluster, on GPUs Ray declares but this machine need not have.

The session's Ray cluster declares four GPUs (tests/ray_fixture.py). A workload on an h100
cluster of four devices then runs the GPU path's code: each device is a GPU reserved from Ray,
each sub-stage's work runs in processes Ray gave exactly that GPU (``ray.get_gpu_ids()`` and
``CUDA_VISIBLE_DEVICES`` as each process saw them), a two-device job trains as a group of two
ranks, and without CUDA the tiny models compute on the CPU. What only a GPU can show (NCCL,
bf16, vLLM's memory share) is listed in ``jigsaw_engine/models/compute.py``.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from jigsaw_engine.errors import SpecError
from jigsaw_engine.graph.substage import SubStage
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.models.loading import weights_digest
from jigsaw_engine.real.jobs import RealJobOptions
from jigsaw_engine.real.pipeline import NodeReport
from jigsaw_engine.real.pipeline_actor import RayExecutor
from jigsaw_engine.real.run import run_real_workload
from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.runtime.ray.placement import DevicePlacement, placed
from jigsaw_engine.runtime.ray.rollout_actor import PlacedRolloutEngine
from jigsaw_engine.runtime.ray.trainer_group import TrainerGroup
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.workload_file import parse_workload
from jigsaw_engine.train.policy_trainer import ActorConfig
from tests.ray_fixture import DECLARED_GPUS
from tests.train.test_real_runtime import tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GPU_CLUSTER = ClusterSpec(1, DECLARED_GPUS, "h100")


class RecordingExecutor(RayExecutor):
    """The Ray executor, keeping when each node ran (submitted, then its result taken) and,
    before its actors go, what each pipeline's processes report and the GPU of each device."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started: dict[Hashable, tuple[str, SubStage, tuple[int, ...], float]] = {}
        self.ran: list[tuple[str, SubStage, tuple[int, ...], float, float]] = []
        self.reports: dict[str, dict[str, Any]] = {}
        self.gpu_of: dict[int, list[str]] = {}

    def submit(self, pipeline_id: str, node: SubStage, devices: tuple[int, ...]) -> Hashable:
        handle = super().submit(pipeline_id, node, devices)
        self.started[handle] = (pipeline_id, node, devices, time.monotonic())
        return handle

    def result(self, handle: Hashable) -> NodeReport:
        report = super().result(handle)
        pipeline_id, node, devices, start = self.started.pop(handle)
        self.ran.append((pipeline_id, node, devices, start, time.monotonic()))
        return report

    def shutdown(self) -> None:
        self.reports = self.device_reports()
        assert self.placement is not None
        self.gpu_of = self.placement.gpu_ids()
        super().shutdown()


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most of ``intervals`` that overlap at any moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


def test_a_real_run_on_declared_gpus_runs_each_sub_stage_on_the_gpus_it_was_placed_on(
    ray_cluster, tiny_policy_cache: Path
) -> None:
    assert not torch.cuda.is_available(), "this test stands in for GPUs; on a GPU host run scripts/gpu_check.py"
    assert resolve_compute_device().kind == "cpu"
    workload = parse_workload(
        {
            "cluster": {"num_nodes": 1, "devices_per_node": DECLARED_GPUS, "device_type": "h100"},
            "pipelines": [tiny_spec("pair", num_gpus=2), tiny_spec("solo", num_gpus=1, seed=1)],
        }
    )
    executors: list[RecordingExecutor] = []

    def make_executor(specs: Mapping[str, Mapping[str, Any]], train_parts: int, cluster: ClusterSpec) -> Any:
        options = RealJobOptions(warmup_steps=40, cache_dir=tiny_policy_cache, rollout_engine="torch")
        executors.append(RecordingExecutor(specs, train_parts=train_parts, options=options, cluster=cluster))
        return executors[-1]

    result = run_real_workload(workload, ["jigsaw"], make_executor=make_executor, rollout_engine="torch")
    (executor,) = executors
    pipelines = result["policies"]["jigsaw"]["pipelines"]
    assert {pid: figures["steps"] for pid, figures in pipelines.items()} == {"p0-pair": 2, "p1-solo": 2}

    # Each engine device is one GPU of Ray's, a different one each.
    gpu_of = executor.gpu_of
    assert all(len(ids) == 1 for ids in gpu_of.values()), gpu_of
    assert len({ids[0] for ids in gpu_of.values()}) == DECLARED_GPUS

    reports = executor.reports
    for pid, report in reports.items():
        # The job's own process and its environment do no device work: they hold no GPU.
        assert report["process"]["gpu_ids"] == [] and report["process"]["cuda_visible_devices"] == "", pid
        assert report["compute"] == "cpu"
        # Every node that ran on devices ran in processes holding exactly those devices' GPUs
        # (tool waits have no device work: nothing runs them).
        for node in report["nodes"]:
            if node["devices"] and node["kind"] != "tool":
                assert node["gpu_ids"] == [gpu_of[d] for d in node["devices"]], (pid, node)
        # Each trainer rank and each rollout worker's process saw its one GPU, in Ray and in CUDA_VISIBLE_DEVICES.
        trainer = report["trainer"]
        for device, rank in zip(trainer["devices"], trainer["ranks"], strict=True):
            assert rank["gpu_ids"] == gpu_of[device] and rank["cuda_visible_devices"] == gpu_of[device][0]
            assert rank["compute"] == "cpu"  # no CUDA here: the GPU's process computes on the CPU
        for worker in report["workers"]:
            if worker["started"]:
                assert worker["gpu_ids"] == gpu_of[worker["device"]]
                assert worker["cuda_visible_devices"] == gpu_of[worker["device"]][0]
                # The last update's weights reached it: its engine serves the trainer's weights.
                assert worker["weights"] == trainer["weights"] and worker["version"] == trainer["version"] == 2

    # A two-device job trained as a group of two ranks, one per GPU; a one-device job on one rank.
    assert len(reports["p0-pair"]["trainer"]["ranks"]) == 2
    assert len({rank["pid"] for rank in reports["p0-pair"]["trainer"]["ranks"]}) == 2
    assert len({rank["gpu_ids"][0] for rank in reports["p0-pair"]["trainer"]["ranks"]}) == 2
    assert len(reports["p1-solo"]["trainer"]["ranks"]) == 1
    assert sum(w["started"] for w in reports["p0-pair"]["workers"]) == 2

    # No GPU held more sub-stages at once than the scheduler placed on its device at once.
    device_of_gpu = {ids[0]: d for d, ids in gpu_of.items()}
    gpus_of_node = {
        (pid, n["kind"], n["bucket"], n["step"], n["worker"]): [g for ids in n["gpu_ids"] or [] for g in ids]
        for pid, report in reports.items()
        for n in report["nodes"]
    }
    ran = [r for r in executor.ran if r[2] and r[1].kind.value != "tool"]
    assert ran, "no sub-stage ran on a device"
    for gpu, device in device_of_gpu.items():
        planned = [(s, e) for _, _, devices, s, e in ran if device in devices]
        held = [
            (s, e)
            for pid, node, _, s, e in ran
            if gpu in gpus_of_node[(pid, node.kind.value, node.bucket, node.step, node.worker)]
        ]
        assert most_at_once(held) == most_at_once(planned), gpu


def test_a_gpu_cluster_larger_than_ray_s_gpus_is_refused_at_once_naming_the_gpus(ray_cluster) -> None:
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        DevicePlacement(ClusterSpec(1, 2 * DECLARED_GPUS, "h100"))
    assert time.monotonic() - started < 5.0  # not the reservation's timeout
    (error,) = caught.value.errors
    assert error.field == "cluster.devices_per_node"
    assert f"1 node(s) of {2 * DECLARED_GPUS} h100 devices" in error.message
    assert f"{2 * DECLARED_GPUS} GPU wanted on one node, the largest node has {DECLARED_GPUS} GPU" in error.message
    assert "--num-gpus" in error.message


def test_workers_placed_elsewhere_move_there_with_their_state(ray_cluster, tmp_path: Path) -> None:
    """The scheduler may place a step's rollout or training on other GPUs than the last: the
    worker's process starts on the new GPU with its weights and its requests, and a trainer
    group forms again there with its whole state."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=32,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    placement = DevicePlacement(GPU_CLUSTER)
    gpu_of = placement.gpu_ids()

    engine = PlacedRolloutEngine(
        lambda memory_share: TorchRolloutEngine(model, pad_token_id=0),
        name="w0",
        placement=partial(placed, placement),
        device=0,
    )
    group = TrainerGroup(model, ActorConfig(), world=2, placement=partial(placed, placement), devices=(0, 1))
    try:
        engine.place((2,))
        assert engine.seen["gpu_ids"] == gpu_of[2]
        new_weights = {name: tensor + 0.01 for name, tensor in model.state_dict().items()}
        engine.load_weights(new_weights)
        request = RolloutRequest("r0", (1, 2, 3), SamplingParams(max_tokens=6, temperature=1.0, seed=3))
        engine.add_request(request)
        engine.step()  # one token on GPU 2, five to go
        engine.place((3,))
        assert engine.moves == 1 and engine.seen["gpu_ids"] == gpu_of[3]
        assert engine.report()["weights"] == weights_digest(new_weights)
        finished = []
        while engine.has_unfinished():
            finished += engine.step()
        assert [f.request_id for f in finished] == ["r0"] and len(finished[0].output_ids) == 6

        group.place((0, 1))
        assert [rank["gpu_ids"] for rank in group.seen()] == [gpu_of[0], gpu_of[1]]
        group.load_state_dict(group.state_dict() | {"model": new_weights})
        group.place((3, 2))
        assert group.moves == 1 and [rank["gpu_ids"] for rank in group.seen()] == [gpu_of[3], gpu_of[2]]
        assert weights_digest(group.weights()) == weights_digest(new_weights)
    finally:
        engine.shutdown()
        group.shutdown()
        placement.remove()
