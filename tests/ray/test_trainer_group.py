"""A real job that asks for two cores trains on two Ray actor processes with FSDP2 among them,
and its step is the one-process step: the same samples, the same update (and for PPO, the
same critic, sharded on the same processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.runtime.ray.trainer_group import CriticGroup, TrainerGroup
from jigsaw_engine.sched.registry import graph_config_for
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.train.critic import CriticTrainer
from tests.processes import ray_actor_processes
from tests.train.test_real_runtime import tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def rank_pids() -> set[int]:
    return ray_actor_processes("TrainerRankActor")


def rank_processes() -> int:
    return len(rank_pids())


def test_a_job_asking_two_devices_trains_across_two_processes_as_one_would(
    ray_cluster, tiny_policy_cache: Path
) -> None:
    spec = parse_pipeline_spec(tiny_spec("math", num_gpus=2, steps=2))
    parts = graph_config_for("jigsaw").train_minibatches
    before = rank_processes()
    one = build_real_pipeline(spec, train_parts=parts, options=RealJobOptions(cache_dir=tiny_policy_cache))
    group = build_real_pipeline(
        spec, train_parts=parts, options=RealJobOptions(cache_dir=tiny_policy_cache, train_across_devices=True)
    )
    trainer = group.job.trainer
    try:
        assert isinstance(trainer, TrainerGroup) and trainer.world == 2
        assert rank_processes() == before + 2
        expected, got = one.run_step(), group.run_step()
        # The same policy sampled the same replies; the update was the same update.
        assert got[names.SCORE_MEAN] == expected[names.SCORE_MEAN]
        assert got[names.PG_LOSS] == pytest.approx(expected[names.PG_LOSS], rel=1e-4, abs=1e-7)
        assert got[names.GRAD_NORM] == pytest.approx(expected[names.GRAD_NORM], rel=1e-3)
        weights = trainer.weights()
        for name, tensor in one.job.trainer.weights().items():
            assert torch.allclose(weights[name], tensor, atol=1e-5), name
        # The next step samples from the group's weights and trains on.
        assert group.run_step()["training/global_step"] == 2.0
    finally:
        trainer.shutdown()  # type: ignore[attr-defined]


def test_a_ppo_job_across_two_processes_shards_its_critic_there_and_learns_as_one_process(
    ray_cluster, tiny_policy_cache: Path
) -> None:
    spec = parse_pipeline_spec({**tiny_spec("math", num_gpus=2, steps=2), "algorithm": "ppo"})
    parts = graph_config_for("jigsaw").train_minibatches
    one = build_real_pipeline(spec, train_parts=parts, options=RealJobOptions(cache_dir=tiny_policy_cache))
    group = build_real_pipeline(
        spec, train_parts=parts, options=RealJobOptions(cache_dir=tiny_policy_cache, train_across_devices=True)
    )
    trainer = group.job.trainer
    try:
        assert isinstance(group.job.critic, CriticGroup)  # not a copy in the job's own process
        expected, got = one.run_step(), group.run_step()
        assert got[names.SCORE_MEAN] == expected[names.SCORE_MEAN]
        assert got[names.VF_LOSS] == pytest.approx(expected[names.VF_LOSS], rel=1e-4, abs=1e-7)
        assert got[names.PG_LOSS] == pytest.approx(expected[names.PG_LOSS], rel=1e-4, abs=1e-7)
        assert isinstance(one.job.critic, CriticTrainer)
        sharded = group.job.critic.state_dict()["model"]  # whole tensors, gathered from the ranks
        for name, tensor in one.job.critic.critic.state_dict().items():
            assert torch.allclose(sharded[name], tensor, atol=1e-5), name
    finally:
        trainer.shutdown()  # type: ignore[attr-defined]


def test_a_rank_that_dies_is_reported_at_once_as_a_lost_worker(ray_cluster) -> None:
    """The other rank would wait in the collective for minutes; the job hears of the death
    within seconds, as a lost worker (it resumes from its checkpoint)."""
    import os
    import signal
    import time

    from jigsaw_engine.errors import WorkerLostError
    from jigsaw_engine.train.policy_trainer import ActorConfig

    before = rank_pids()
    group = TrainerGroup(torch.nn.Linear(4, 4), ActorConfig(), world=2)
    try:
        assert set(group.weights()) == {"weight", "bias"}
        os.kill(max(rank_pids() - before), signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(WorkerLostError, match="trainer rank"):
            group.weights()
        assert time.monotonic() - started < 30
    finally:
        group.shutdown()
