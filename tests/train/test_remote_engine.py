"""A rollout engine in a Ray actor of its own (``RemoteRolloutEngine``): the interface tests run on
it through ``make_engine``; here, what only a separate process can do: die."""

from __future__ import annotations

import os
import signal
from functools import partial

import pytest
import ray

from jigsaw_engine.errors import WorkerLostError
from jigsaw_engine.models.chat import render_turn
from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
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
