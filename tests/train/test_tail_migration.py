"""Tail consolidation for real: a worker's unfinished episodes move to another worker's engine."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from jigsaw_engine.envs.self_refine import SelfRefineEnv
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.train.rl_job import RLJob, RLJobConfig

from .conftest import ARITH_TASKS


def _job(policy, config: RLJobConfig, env=None) -> RLJob:
    pad = policy.tokenizer.pad_token_id
    engines = [TorchRolloutEngine(policy.fresh_model(), pad_token_id=pad) for _ in range(2)]
    env = env or SelfRefineEnv(ARITH_TASKS, max_turns=3)
    return RLJob(model=policy.fresh_model(), tokenizer=policy.tokenizer, env=env, engines=engines, config=config)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_consolidated_tails_finish_with_the_same_tokens_while_the_freed_worker_serves_another_job(
    arith_policy, temperature
):
    """Multi-turn episodes on two workers. Once each worker's first replies are in (the wrong
    ones go on to another try), worker 1's unfinished episodes are exported and re-prefilled
    on worker 0; worker 1 then runs another job's whole step while worker 0 finishes the
    tails. Every sample (all turns, feedback included) is token-for-token what the unmigrated
    step produced, and so is what the step learns."""
    config = RLJobConfig(prompts_per_step=8, n=4, max_response_tokens=8, temperature=temperature, seed=4)
    plain = _job(arith_policy, config)
    plain.begin_step()
    plain.rollout(0)
    plain.rollout(1)
    plain.score()
    expected = [(e.group, e.index, e.sample.token_ids, e.reward) for e in plain.scored_episodes()]
    expected_metrics = _finish(plain)

    moved = _job(arith_policy, config)
    moved.begin_step()
    for worker in (0, 1):
        _, total = moved.live_episodes(worker)
        moved.rollout(worker, until_live_at_most=total - 1)
    live_before = moved.live_episodes(1)[0]
    assert moved.migrate_tails(source=1, target=0) == live_before > 0
    assert moved.live_episodes(1)[0] == 0 and not moved.engines[1].has_unfinished()

    other = RLJob(
        model=arith_policy.fresh_model(),
        tokenizer=arith_policy.tokenizer,
        env=SelfRefineEnv(ARITH_TASKS, max_turns=2),
        engine=moved.engines[1],  # the freed worker's engine serves the other job
        config=RLJobConfig(prompts_per_step=4, n=2, max_response_tokens=8, seed=9),
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        tails = pool.submit(moved.rollout, 0)
        other_step = pool.submit(other.run_step)
        tails.result()
        assert other_step.result()[names.RESPONSE_LENGTH_MEAN] > 0
    moved.score()
    got = [(e.group, e.index, e.sample.token_ids, e.reward) for e in moved.scored_episodes()]
    assert got == expected
    got_metrics = _finish(moved)
    assert got_metrics[names.SCORE_MEAN] == expected_metrics[names.SCORE_MEAN]
    assert got_metrics[names.PG_LOSS] == pytest.approx(expected_metrics[names.PG_LOSS], abs=1e-6)


def _finish(job: RLJob) -> dict[str, float]:
    job.old_log_probs()
    job.ref_log_probs()
    return job.sync_weights()
