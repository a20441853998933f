"""A job's workers in Ray actors of their own. The rollout engine (``RemoteRolloutEngine``) passes
the interface tests through ``make_engine``; here, what only a separate process can do (die, fail
to start), and the environment's actor (``RemoteEnvironment``)."""

from __future__ import annotations

import os
import signal
from functools import partial

import pytest
import ray

from jigsaw_engine.envs.retrieval import RetrievalEnv, make_retrieval_env
from jigsaw_engine.errors import WorkerLostError
from jigsaw_engine.models.chat import render_turn
from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.runtime.ray.env_actor import RemoteEnvironment
from jigsaw_engine.runtime.ray.rollout_actor import RemoteRolloutEngine

pytestmark = pytest.mark.ray


def test_a_rollout_worker_whose_process_dies_is_reported_lost_not_failed(ray_cluster, arith_policy) -> None:
    factory = partial(TorchRolloutEngine, arith_policy.fresh_model(), pad_token_id=arith_policy.tokenizer.pad_token_id)
    engine = RemoteRolloutEngine.start(factory, name="victim")
    prompt = tuple(arith_policy.tokenizer.encode(render_turn("user", "Compute 1+2.")))
    engine.add_request(RolloutRequest("r0", prompt, SamplingParams(max_tokens=20, seed=1)))
    engine.step()
    assert engine.has_unfinished()

    os.kill(ray.get(engine._actor.pid.remote()), signal.SIGKILL)
    with pytest.raises(WorkerLostError, match="rollout worker victim died"):
        for _ in range(100):  # the next call finds the process gone
            engine.step()


def test_a_broken_engine_fails_when_the_worker_starts_not_at_its_first_request(ray_cluster) -> None:
    def broken() -> TorchRolloutEngine:
        raise ValueError("model: no such checkpoint")

    with pytest.raises(RuntimeError, match="rollout worker broken could not be built: ValueError: model: no such"):
        RemoteRolloutEngine.start(broken, name="broken")


def test_episodes_in_the_environment_actor_answer_as_the_local_environment_does(ray_cluster) -> None:
    """The retrieval tool runs in the actor: same passages, same grades, the tool's time reported."""
    local = make_retrieval_env()
    remote = RemoteEnvironment.start(local, make_retrieval_env)
    assert (remote.name, remote.max_turns, list(remote.dataset())) == (
        local.name,
        local.max_turns,
        list(local.dataset()),
    )
    task = local.dataset()[0]
    replies = [f"<search>{task.prompt.splitlines()[0]}</search>", f"#### {task.answer}"]
    here, there = local.episode(task), remote.episode(task)
    for reply in replies:
        expected, got = here.respond(reply), there.respond(reply)
        assert (got.done, got.reward, got.observation, got.role) == (
            expected.done,
            expected.reward,
            expected.observation,
            expected.role,
        )
    assert got.done and got.reward == 1.0
    assert ray.get(remote._actor.open_episodes.remote()) == 0  # a finished episode is not kept


def test_an_environment_that_cannot_be_built_fails_with_its_reason(ray_cluster) -> None:
    def broken() -> RetrievalEnv:
        raise FileNotFoundError("corpus.jsonl: no such file")

    with pytest.raises(RuntimeError, match=r"could not be built: FileNotFoundError: corpus\.jsonl: no such file"):
        RemoteEnvironment.start(make_retrieval_env(), broken)
