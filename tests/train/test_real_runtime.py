"""The simulator's controller and scheduler driving real tiny pipelines (threads here; Ray in tests/ray)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from jigsaw_engine.cli import main
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.errors import SpecError
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline, check_real_spec
from jigsaw_engine.real.pipeline import RealPipeline
from jigsaw_engine.real.real_runtime import RealRuntime, ThreadExecutor
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.sched.registry import make_scheduler, real_graph_config_for
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec


@pytest.fixture()
def fast(tiny_policy_cache: Path) -> RealJobOptions:
    """A short warm-up, built once per session."""
    return RealJobOptions(warmup_steps=40, cache_dir=tiny_policy_cache)


def tiny_spec(name: str, *, workload: str = "gsm8k", num_gpus: int = 1, steps: int = 2, seed: int = 0) -> dict:
    return {
        "name": name,
        "model": "tiny-qwen2-1m",
        "workload": workload,
        "data": {"train_batch_size": 8},
        "rollout": {"n": 4, "max_response_length": 8},
        "resources": {"num_gpus": num_gpus},
        "trainer": {"total_steps": steps},
        "seed": seed,
    }


def run_scheduled(pipeline: RealPipeline, spec: dict, policy: str) -> ClusterController:
    """``pipeline`` driven to its end by ``policy`` on a two-core cluster, on this process's threads."""
    cluster = ClusterSpec(1, 2, "cpu")
    cost = RooflineCostModel(load_device_profile("cpu"))
    executor = ThreadExecutor({"arith": pipeline})
    controller = ClusterController(
        cluster,
        cost,
        runtime=RealRuntime(executor),
        scheduler=make_scheduler(policy, cluster, cost, real_pipelines=True),
        graph_config=real_graph_config_for(policy),
    )
    controller.submit("arith", spec)
    controller.run_until_idle()
    executor.shutdown()
    return controller


def test_scheduled_sub_stages_train_exactly_like_plain_steps(fast):
    """Two workers, the update cut into the graph's four train sub-stages, run in the order the
    Jigsaw scheduler picks on the wall clock: the same rewards and the same final weights as
    calling run_step twice. The schedule changes when work runs, never what is learned."""
    spec = parse_pipeline_spec(tiny_spec("arith", num_gpus=2))
    graph_config = real_graph_config_for("jigsaw")
    scheduled = build_real_pipeline(spec, train_parts=graph_config.train_minibatches, options=fast)
    plain = build_real_pipeline(spec, train_parts=1, options=fast)
    expected = [plain.job.run_step() for _ in range(2)]

    controller = run_scheduled(scheduled, tiny_spec("arith", num_gpus=2), "jigsaw")

    assert controller.state_of("arith").value == "succeeded"
    got = scheduled.step_metrics
    assert [m[names.SCORE_MEAN] for m in got] == [m[names.SCORE_MEAN] for m in expected]
    for name, tensor in plain.job.trainer.model.state_dict().items():
        torch.testing.assert_close(scheduled.job.trainer.model.state_dict()[name], tensor)
    kinds = {span.kind for span in controller.timeline}
    assert {"prefill", "decode", "reward", "old_logprob", "train", "weight_sync"} <= kinds
    assert all(span.end_s >= span.start_s >= 0 for span in controller.timeline)


def test_specs_that_cannot_run_for_real_say_why_field_by_field():
    spec = parse_pipeline_spec(
        {
            "name": "x",
            "model": "qwen3-4b",
            "workload": "code_tool",
            "algorithm": "ppo",
            "mode": "async",
            "rollout": {"n": 2},
        }
    )
    errors = {e.field: e.message for e in check_real_spec(spec, path="pipelines[3]")}
    assert set(errors) == {"pipelines[3].model", "pipelines[3].workload"}  # async itself runs
    assert "tiny-qwen2-1m" in errors["pipelines[3].model"]
    with pytest.raises(SpecError):
        build_real_pipeline(spec, train_parts=1)
    # The decoupled loss needs the engine's log-probs of the trainer's (untempered) distribution.
    tempered = parse_pipeline_spec({**tiny_spec("t"), "mode": "async", "rollout": {"n": 2, "temperature": 0.7}})
    assert [e.field for e in check_real_spec(tempered)] == ["rollout.temperature"]


@pytest.mark.slow
def test_jigsaw_run_compares_policies_on_real_pipelines_and_writes_json(tmp_path, capsys):
    workload = {
        "cluster": {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"},
        "pipelines": [tiny_spec("arith", seed=1), tiny_spec("refine", workload="aime_refine", seed=2)],
    }
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(workload))
    out = tmp_path / "out.json"
    rc = main(
        [
            "run",
            "--workload",
            str(path),
            "--policies",
            "serial,jigsaw",
            "--steps",
            "1",
            "--executor",
            "threads",
            "--json",
            str(out),
            "--cache-dir",  # a cold cache: the test must not lean on earlier runs' policies
            str(tmp_path / "policies"),
        ]
    )
    assert rc == 0
    result = json.loads(out.read_text())
    assert set(result["policies"]) == {"serial", "jigsaw", "verl"}
    assert result["policies"]["verl"]["chosen"] == "serial"
    for figures in result["policies"].values():
        assert figures["tokens"] > 0 and figures["throughput_tokens_per_s"] > 0
        # The simulator's forecast of the same run, from the sequences it really produced.
        assert figures["predicted_makespan_s"] > 0 and abs(figures["prediction_error"]) < 10
        assert set(figures["pipelines"]) == {"p0-arith", "p1-refine"}
        # Timed beside the run: how much slower the machine ran than when its profile was made.
        assert 0.2 < figures["machine_slowdown"] < 5
        low, high = figures["machine_slowdown_range"]  # timed before and after: the mean scales the forecast
        assert low <= figures["machine_slowdown"] <= high
        assert all("prediction_error_at_profile_speed" in f for f in figures["pipelines"].values())
    for f in result["policies"]["serial"]["pipelines"].values():  # alone: the forecast scales as a whole
        # (jigsaw's look-ahead may decide otherwise on a slower machine: its schedule need not scale).
        # Each serial pipeline ran, and was scaled, on its own: the policy's slowdown is their mean.
        assert f["prediction_error"] == pytest.approx(
            (1 + f["prediction_error_at_profile_speed"]) * f["machine_slowdown"] - 1, rel=0.05
        )
    serial, jigsaw = result["policies"]["serial"]["pipelines"], result["policies"]["jigsaw"]["pipelines"]
    for pid in serial:  # same seeds, same learning, whatever the schedule
        assert serial[pid]["score_mean_per_step"] == jigsaw[pid]["score_mean_per_step"]
        assert serial[pid]["latency_ratio_vs_alone"] == 1.0
    printed = capsys.readouterr()
    assert "serial" in printed.out and "jigsaw" in printed.out
    assert "forecast within 15%: " in printed.out and " of 4 pipeline runs" in printed.out
    assert "1/1 steps" in printed.err


def test_jigsaw_run_rejects_a_workload_it_cannot_run_with_field_paths(tmp_path, capsys):
    workload = {
        "cluster": {"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"},
        "pipelines": [{"name": "big", "model": "qwen3-4b", "workload": "gsm8k"}],
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(workload))
    assert main(["run", "--workload", str(path), "--executor", "threads"]) == 2  # bad input
    err = capsys.readouterr().err
    assert "pipelines[0].model: a real run needs a Hugging Face checkpoint" in err
    assert "cluster.device_type: the cluster's devices are h100 GPUs reserved from Ray" in err
    assert "--executor ray" in err
    assert main(["run", "--workload", str(path), "--policies", "fastest"]) == 2


def test_a_failing_sub_stage_is_reported_with_its_task_and_cause(fast):
    from jigsaw_engine.graph.substage import ResourceClass, SubStage, SubStageKind
    from jigsaw_engine.tasks import Task

    pipeline = build_real_pipeline(parse_pipeline_spec(tiny_spec("arith")), train_parts=1, options=fast)
    executor = ThreadExecutor({"arith": pipeline})
    runtime = RealRuntime(executor)
    # A node of step 5 while the job is at step 0: a synchronous job refuses to roll it out.
    node = SubStage("s5/w0/prefill", SubStageKind.PREFILL, 5, 0, None, 1, 0.0, ResourceClass.COMPUTE, 0.01)
    runtime.start(Task("arith", node, (0,)))
    finished = []
    while (t := runtime.next_event_s()) is not None:
        finished += runtime.advance_to(t)
    executor.shutdown()
    assert [f.task.task_id for f in finished] == ["arith/s5/w0/prefill"]
    error = finished[0].error or ""
    assert "StepOrderError: node s5/w0/prefill: step 5's rollout would run 5 steps ahead" in error, error
    assert "staleness 0 allows at most 0" in error


def test_a_pipeline_on_vllm_learns_exactly_what_it_learns_on_the_torch_engine(fast):
    """Sampling is portable across engines, so the rollout engine is an implementation detail:
    two steps on vLLM give the rewards of two steps on the torch engine."""
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install -e .[rollout-cpu]")
    spec = parse_pipeline_spec(tiny_spec("arith", num_gpus=2))
    on_torch = build_real_pipeline(spec, train_parts=1, options=fast)
    on_vllm = build_real_pipeline(spec, train_parts=1, options=replace(fast, rollout_engine="vllm"))
    assert type(on_vllm.job.engines[0]).__name__ == "VllmRolloutEngine"
    torch_scores = [on_torch.run_step()[names.SCORE_MEAN] for _ in range(2)]
    vllm_scores = [on_vllm.run_step()[names.SCORE_MEAN] for _ in range(2)]
    assert vllm_scores == torch_scores


def test_a_users_jsonl_dataset_trains_and_a_bad_row_is_named_by_file_and_line(tmp_path, capsys, fast):
    rows = [{"prompt": f"Compute {a}+{b}.", "answer": str(a + b)} for a in range(5) for b in range(5)]
    good = tmp_path / "mine.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {**tiny_spec("mine"), "data": {"train_batch_size": 4, "train_files": str(good), "grader": "numeric"}}
    pipeline = build_real_pipeline(parse_pipeline_spec(spec), train_parts=1, options=fast)
    assert pipeline.job.env.name == "jsonl" and len(pipeline.job.env.dataset()) == 25
    metrics = pipeline.run_step()
    assert metrics[names.RESPONSE_LENGTH_MEAN] > 0

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n" + '{"prompt": "Compute 1+1."}\n')
    workload = {
        "cluster": {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"},
        "pipelines": [{**spec, "data": {"train_batch_size": 4, "train_files": str(bad)}}],
    }
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(workload))
    argv = ["run", "--workload", str(path), "--executor", "threads", "--steps", "1", "--cache-dir", str(tmp_path / "p")]
    assert main(argv) == 1
    assert f'{bad}:2: missing field "answer"' in capsys.readouterr().err


def test_a_pipeline_grown_onto_a_spare_core_runs_its_steps_wider_and_learns_the_same(fast):
    """One core asked for on a two-core cluster, and an engine built per core: once the
    scheduler grows the pipeline's home onto the idle core (greedy grows a lone pipeline's home
    from its second step; jigsaw does when its step profile says the width pays), its steps
    really generate on two workers, and it learns exactly what it learns on one (sampling is
    per episode)."""
    spec = parse_pipeline_spec(tiny_spec("arith", num_gpus=1, steps=3))
    graph_config = real_graph_config_for("jigsaw")
    scheduled = build_real_pipeline(
        spec, train_parts=graph_config.train_minibatches, options=replace(fast, rollout_workers=2)
    )
    plain = build_real_pipeline(spec, train_parts=1, options=fast)
    expected = [plain.job.run_step() for _ in range(3)]

    controller = run_scheduled(scheduled, tiny_spec("arith", num_gpus=1, steps=3), "greedy")

    assert controller.state_of("arith").value == "succeeded"
    workers = {(span.step, span.worker) for span in controller.timeline if span.kind == "decode"}
    assert (0, 1) not in workers and {w for s, w in workers if s >= 1} == {0, 1}, workers
    got = scheduled.step_metrics
    assert [m[names.SCORE_MEAN] for m in got] == [m[names.SCORE_MEAN] for m in expected]
    for name, tensor in plain.job.trainer.model.state_dict().items():
        torch.testing.assert_close(scheduled.job.trainer.model.state_dict()[name], tensor)


def test_the_forecast_on_a_machine_twice_as_slow_takes_twice_as_long():
    # Recorded sequences of two tiny jobs without tools, replayed on the CPU profile as it is
    # and slowed down twice: every sub-stage, so the makespan and each step, doubles.
    from jigsaw_engine.real.run import predict_with_simulator
    from jigsaw_engine.workload.lengths import sample_step

    specs = {"p0-a": tiny_spec("a", steps=2), "p1-b": tiny_spec("b", workload="aime_refine", seed=3, steps=2)}
    plans = {pid: {k: sample_step(parse_pipeline_spec(spec), k) for k in range(2)} for pid, spec in specs.items()}
    cluster = ClusterSpec(num_nodes=1, devices_per_node=2, device_type="cpu")
    graph = replace(real_graph_config_for("dedicated"), prefix_cache=False)
    normal = predict_with_simulator(cluster, "dedicated", specs, plans, graph_config=graph)
    slow = predict_with_simulator(cluster, "dedicated", specs, plans, graph_config=graph, slowdown=2.0)
    assert slow["makespan_s"] == pytest.approx(2 * normal["makespan_s"])
    for pid in specs:
        assert slow["pipelines"][pid] == pytest.approx(2 * normal["pipelines"][pid])


def test_the_forecast_counts_stages_from_a_step_on_leaving_a_warm_up_out():
    # scripts/time_real_steps.py times steps after a warm-up one; its forecast must count the same.
    from jigsaw_engine.real.run import predict_with_simulator
    from jigsaw_engine.workload.lengths import sample_step

    specs = {"p0-a": tiny_spec("a", steps=2)}
    plans = {"p0-a": {k: sample_step(parse_pipeline_spec(specs["p0-a"]), k) for k in range(2)}}
    cluster = ClusterSpec(num_nodes=1, devices_per_node=2, device_type="cpu")
    graph = replace(real_graph_config_for("dedicated"), prefix_cache=False)
    both = predict_with_simulator(cluster, "dedicated", specs, plans, graph_config=graph)["stages"]["p0-a"]
    second = predict_with_simulator(cluster, "dedicated", specs, plans, graph_config=graph, from_step=1)
    assert set(second["stages"]["p0-a"]) == set(both)
    for kind, seconds in second["stages"]["p0-a"].items():
        assert 0 < seconds < both[kind], kind
    beyond = predict_with_simulator(cluster, "dedicated", specs, plans, graph_config=graph, from_step=2)
    assert beyond["stages"] == {} and beyond["makespan_s"] == second["makespan_s"]


def test_the_forecast_takes_the_constants_of_the_runs_rollout_engine():
    # A run on vLLM is forecast with the profile's vLLM constants: its paged cache, its decode
    # and prefill costs, and each weight sync's reload; a run on the torch engine with the
    # profile's own.
    from jigsaw_engine.real.run import predict_with_simulator
    from jigsaw_engine.workload.lengths import sample_step

    specs = {"p0-a": tiny_spec("a", steps=2)}
    plans = {"p0-a": {k: sample_step(parse_pipeline_spec(specs["p0-a"]), k) for k in range(2)}}
    cluster = ClusterSpec(num_nodes=1, devices_per_node=2, device_type="cpu")
    graph = real_graph_config_for("dedicated")
    stages = {
        engine: predict_with_simulator(cluster, "dedicated", specs, plans, graph_config=graph, rollout_engine=engine)[
            "stages"
        ]["p0-a"]
        for engine in (None, "torch", "vllm")
    }
    assert stages["torch"] == stages[None]
    model = parse_pipeline_spec(specs["p0-a"]).model
    for engine in ("torch", "vllm"):
        sync_s = RooflineCostModel(load_device_profile("cpu", engine)).weight_sync_s(model)
        assert stages[engine]["weight_sync"] == pytest.approx(2 * sync_s, abs=1e-4)
    assert stages["vllm"]["weight_sync"] > stages["torch"]["weight_sync"] + 0.01  # two reloads
    assert stages["vllm"]["rollout"] != pytest.approx(stages["torch"]["rollout"], rel=0.05)
    for kind in ("old_logprob", "ref_logprob", "train"):
        assert stages["vllm"][kind] == pytest.approx(stages["torch"][kind])
