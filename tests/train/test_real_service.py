"""The engine as the service runs it in real mode: tiny pipelines submitted one at a time to a
running engine, trained for real on the wall clock, reporting their own metrics and samples."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jigsaw_engine.api import EngineConfig, start_local_engine, validate_spec
from jigsaw_engine.contracts import EngineHost, EventKind
from jigsaw_engine.errors import SpecError
from jigsaw_engine.rl import metrics as names
from tests.train.test_real_runtime import tiny_spec


@pytest.fixture(scope="module")
def policy_cache(tiny_policy_cache: Path) -> Path:
    """Warmed-up tiny policies, shared with the session (the warm-up is the slow part)."""
    return tiny_policy_cache


def wait_until_ended(engine: EngineHost, pipeline_ids: set[str], timeout_s: float = 180) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = engine.events_since(0, 100_000).events
        ended = {
            e.pipeline_id for e in events if e.kind is EventKind.STATUS and e.data["status"] in ("succeeded", "failed")
        }
        if pipeline_ids <= ended:
            return events
        time.sleep(0.2)
    raise AssertionError(f"pipelines did not end: {pipeline_ids}")


def test_real_mode_trains_submitted_pipelines_and_reports_real_metrics_and_samples(
    tmp_path: Path, policy_cache: Path
) -> None:
    config = EngineConfig.from_mapping(
        {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"},
        mode="real",
        real_cache_dir=str(policy_cache),
        real_checkpoint_dir=str(tmp_path / "checkpoints"),
    )
    engine = start_local_engine(config)
    try:
        engine.submit("math", tiny_spec("math", steps=2))
        time.sleep(0.5)  # the second arrives while the first is already building or running
        engine.submit("refine", tiny_spec("refine", workload="aime_refine", steps=2, seed=1))
        events = wait_until_ended(engine, {"math", "refine"})
    finally:
        engine.close()
    for pid in ("math", "refine"):
        mine = [e for e in events if e.pipeline_id == pid]
        statuses = [e.data["status"] for e in mine if e.kind is EventKind.STATUS]
        assert statuses[-1] == "succeeded", statuses
        metrics = [e.data for e in mine if e.kind is EventKind.METRICS]
        assert [m["step"] for m in metrics] == [1, 2]
        for m in metrics:  # the job's own measurements, not the cost model's
            assert names.SCORE_MEAN in m["metrics"] and "actor/pg_loss" in m["metrics"]
            assert 0.0 <= m["metrics"][names.SCORE_MEAN] <= 1.0
            assert m["metrics"]["usage/device_seconds"] > 0
        samples = [e.data for e in mine if e.kind is EventKind.SAMPLES]
        assert [s["step"] for s in samples] == [1, 2]
        first = samples[0]["samples"][0]
        assert first["prompt"] and isinstance(first["completion"], str) and 0.0 <= first["reward"] <= 1.0
        assert (tmp_path / "checkpoints" / pid).is_dir()  # a checkpoint after every step
    turns = [
        s["turns"]
        for e in events
        if e.pipeline_id == "refine" and e.kind is EventKind.SAMPLES
        for s in e.data["samples"]
    ]
    assert max(turns) >= 1


def test_real_mode_refuses_what_cannot_run_here_at_submit() -> None:
    cluster = EngineConfig.from_mapping({"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"}, mode="real")
    problems = {
        e.field: e.message
        for e in validate_spec(
            {**tiny_spec("x"), "model": "qwen3-0.6b", "trainer": {"total_steps": 4, "start_step": 2}},
            cluster.cluster,
            mode="real",
        )
    }
    assert problems["model"].startswith("a real run needs a Hugging Face checkpoint")
    assert "trainer.start_step" in problems
    # GPUs are reserved from Ray for the processes that run on them: not on this process's threads.
    on_gpus = EngineConfig.from_mapping({"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"}, mode="real")
    with pytest.raises(SpecError, match="ENGINE_BACKEND=ray"):
        start_local_engine(on_gpus)


def test_after_an_engine_restart_a_real_job_resumes_after_the_step_the_control_plane_recorded(
    tmp_path: Path, policy_cache: Path
) -> None:
    """The engine dies after three steps of a real job; the control plane had recorded only the
    checkpoint of step 1 (its events lag the engine). A new engine on the same checkpoint folder
    resumes after exactly step 1: steps 2 and 3 are trained again from the same state, so they
    measure what they measured before, and the job ends at step 4 having run each step once."""

    def engine():
        return start_local_engine(
            EngineConfig.from_mapping(
                {"num_nodes": 1, "devices_per_node": 1, "device_type": "cpu"},
                mode="real",
                real_cache_dir=str(policy_cache),
                real_checkpoint_dir=str(tmp_path / "checkpoints"),
            )
        )

    def scores(events: list) -> dict[int, float]:
        return {
            e.data["step"]: e.data["metrics"][names.SCORE_MEAN]
            for e in events
            if e.kind is EventKind.METRICS and e.pipeline_id == "job"
        }

    first = engine()
    try:
        first.submit("job", tiny_spec("job", steps=3))
        before = scores(wait_until_ended(first, {"job"}))
    finally:
        first.close()
    assert sorted(before) == [1, 2, 3]
    assert (tmp_path / "checkpoints" / "job" / "step-000003").is_dir()

    second = engine()
    try:
        resumed_spec = tiny_spec("job", steps=4)
        resumed_spec["trainer"]["start_step"] = 1
        second.submit("job", resumed_spec)
        after = scores(wait_until_ended(second, {"job"}))
    finally:
        second.close()
    assert sorted(after) == [2, 3, 4]
    assert after[2] == before[2] and after[3] == before[3]


def test_a_real_job_cannot_resume_from_a_checkpoint_it_never_wrote(tmp_path: Path, policy_cache: Path) -> None:
    engine = start_local_engine(
        EngineConfig.from_mapping(
            {"num_nodes": 1, "devices_per_node": 1, "device_type": "cpu"},
            mode="real",
            real_cache_dir=str(policy_cache),
            real_checkpoint_dir=str(tmp_path / "checkpoints"),
        )
    )
    try:
        spec = tiny_spec("job", steps=3)
        spec["trainer"]["start_step"] = 2
        engine.submit("job", spec)
        events = wait_until_ended(engine, {"job"})
    finally:
        engine.close()
    failed = [e.data for e in events if e.kind is EventKind.STATUS and e.data["status"] == "failed"]
    assert failed and "checkpoint of step 2 not found" in failed[-1]["reason"]
