"""The watch line: status, step/total and the reward when a job reports one."""

from __future__ import annotations

from typing import Any

from jigsaw_client.render import SIMULATED_MEANING, ProgressView, job_table


def _job(**overrides: Any) -> Any:
    return {"status": "queued", "progress": {"step": 0, "total_steps": 2}, **overrides}


def _event(seq: int, kind: str, data: dict[str, Any]) -> Any:
    return {"seq": seq, "kind": kind, "created_at": "2026-11-02T14:03:07+00:00", "data": data}


def test_progress_lines_show_status_step_and_reward_once_each() -> None:
    view = ProgressView(_job())
    lines = [
        view.update(_event(1, "status", {"status": "running", "reason": "placed"})),
        view.update(_event(2, "metrics", {"step": 1, "total_steps": 2, "metrics": {"critic/rewards/mean": 0.25}})),
        view.update(_event(3, "log", {"level": "info", "message": "hello"})),
        view.update(_event(4, "metrics", {"step": 2, "total_steps": 2, "metrics": {"critic/rewards/mean": 0.5}})),
        view.update(_event(5, "status", {"status": "failed", "reason": "worker lost"})),
    ]
    assert [line and line.split("] ", 1)[1] for line in lines] == [
        "running     step 0/2",
        "running     step 1/2  reward 0.25",
        None,
        "running     step 2/2  reward 0.5",
        "failed      step 2/2  reward 0.5  (worker lost)",
    ]


def test_no_reward_metric_means_no_reward_column() -> None:
    view = ProgressView(_job(status="running"))
    line = view.update(_event(1, "metrics", {"step": 1, "total_steps": 2, "metrics": {"perf/throughput": 9.0}}))
    assert line is not None and "reward" not in line


def _listed(job_id: str, engine_mode: str) -> Any:
    return {
        "id": job_id,
        "name": f"run-{job_id}",
        "status": "succeeded",
        "engine_mode": engine_mode,
        "queue_position": None,
        "progress": {"step": 2, "total_steps": 2},
        "num_gpus": 1,
        "device_type": "cpu",
        "created_at": "2026-11-02T14:03:07+00:00",
    }


def test_the_table_says_which_runs_were_simulated_and_what_that_means() -> None:
    lines = job_table([_listed("a", "real"), _listed("b", "simulated")]).splitlines()
    assert lines[0].split()[3] == "MODE"
    assert [line.split()[3] for line in lines[1:3]] == ["real", "simulated"]
    assert lines[-1] == f"simulated: {SIMULATED_MEANING}"
    assert "simulated:" not in job_table([_listed("a", "real")])  # nothing to explain
