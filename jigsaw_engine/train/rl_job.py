"""One RL post-training job on one process: rollout, reward, advantages, update, weight sync.

:meth:`RLJob.run_step` is a whole synchronous step, in verl's order, with each phase timed
under verl's metric names. The job keeps everything needed to resume (policy, optimizer, data
cursor, RNG, step) and writes it atomically, so a job killed mid-step restarts that step from
the last checkpoint and neither loses nor repeats one.

An asynchronous job (``staleness`` k > 0, AReaL's scheme) keeps up to k + 1 steps open: the
rollout of step ``s`` may begin once step ``s - k - 1`` has trained, so later steps generate
while an earlier one trains, and never more than k steps ahead (the job refuses, whatever its
caller does). Each episode records the policy version that generated it
(:mod:`~jigsaw_engine.train.rollout_workers`), and the update corrects for the lag with the
decoupled PPO loss: the log-probs the engine sampled with are the behaviour policy, the
``old_logprob`` forward the proximal one.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import Environment, EnvTask
from jigsaw_engine.failpoints import failpoint
from jigsaw_engine.models.loading import export_policy
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rl.advantages import AdvantageEstimator, compute_advantages, gae_advantages, outcome_token_rewards
from jigsaw_engine.rl.dapo import count_informative_groups, informative_groups, overlong_penalty
from jigsaw_engine.rl.kl import estimate_kl
from jigsaw_engine.rollout.protocol import MEMORY_RELEASED, RolloutEngine, SamplingParams
from jigsaw_engine.train.critic import CriticConfig, CriticTrainer, ValueTrainer
from jigsaw_engine.train.episodes import EpisodeBatch, EpisodeResult
from jigsaw_engine.train.policy_trainer import ActorConfig, ActorTrainer, PolicyTrainer, mean_metrics
from jigsaw_engine.train.rollout_workers import (
    RecordingEngine,
    RolloutWorkers,
    SampledTurn,
    behaviour_log_probs,
    behaviour_turns,
)
from jigsaw_engine.train.token_batch import TokenBatch, collate
from jigsaw_engine.workload.plans import SequencePlan

logger = logging.getLogger(__name__)

MODEL_FOLDER = "model"
"""A checkpoint's policy as a Hugging Face directory, beside the resume state (``state.pt``)."""

SAMPLES_PER_STEP = 4
"""Completions kept per step for people to read (the dashboard's samples)."""

VALIDATION_SEED_OFFSET = 1_000_000_007
"""Keeps validation's sampling seeds apart from the training steps' (a sampled pass, ``val_kwargs``)."""


class StepOrderError(RuntimeError):
    """A phase asked of a step the job may not run now: a rollout further ahead of training
    than the staleness allows, a step trained out of order, a step not open."""


@dataclass(frozen=True, slots=True)
class RLJobConfig:
    prompts_per_step: int = 16
    """Tasks per step (verl's ``data.train_batch_size``)."""
    n: int = 8
    """Responses per task (``actor_rollout_ref.rollout.n``): the group GRPO normalises over."""
    max_response_tokens: int = 32
    """Tokens per reply at most (``data.max_response_length``)."""
    temperature: float = 1.0
    adv_estimator: AdvantageEstimator = "grpo"
    norm_adv_by_std: bool = True
    """GRPO's division by the group std (off = Dr. GRPO)."""
    kl_in_reward_coef: float = 0.0
    """KL to the reference subtracted from the reward (REINFORCE++ style); 0 = off."""
    dynamic_sampling: bool = False
    """DAPO: train only on groups whose rewards differ (the others have zero advantage)."""
    overlong_buffer_tokens: int = 0
    """DAPO's soft overlong penalty over the last this-many tokens before the limit; 0 = off."""
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig | None = None
    """PPO's critic; required by (and only used with) ``adv_estimator='gae'``."""
    colocated: bool = True
    """The rollout engines share their devices with the trainer (verl's layout): idle ones give
    their memory back while an update runs. False: disaggregated, nothing to give back."""
    staleness: int = 0
    """Asynchronous RL: how many steps a rollout may run ahead of training (the spec's
    ``staleness`` with ``mode: async``). Step ``s``'s rollout begins once step ``s - staleness
    - 1`` has trained; 0 is synchronous. Above 0 the update uses the decoupled PPO loss."""
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "n", "max_response_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.staleness < 0:
            raise ValueError(f"staleness: must be >= 0 (0 = synchronous), got {self.staleness}")
        if self.staleness > 0 and self.temperature != 1.0:
            raise ValueError(
                f"temperature: an asynchronous job samples at 1.0 (its behaviour log-probs must be the "
                f"trainer's distribution), got {self.temperature}"
            )
        if (self.adv_estimator == "gae") != (self.critic is not None):
            raise ValueError("critic: 'gae' (PPO) needs a critic and only it uses one; set both or neither")
        if not 0 <= self.overlong_buffer_tokens <= self.max_response_tokens:
            raise ValueError(
                f"overlong_buffer_tokens: must be in [0, max_response_tokens={self.max_response_tokens}], "
                f"got {self.overlong_buffer_tokens}"
            )
        if self.kl_in_reward_coef > 0 and self.adv_estimator not in ("reinforce_plus_plus", "gae"):
            raise ValueError(
                "kl_in_reward_coef: only reinforce_plus_plus and gae take KL in the reward; use actor.kl_coef"
            )


@dataclass(slots=True)
class DataCursor:
    """Where the job is in its dataset: an epoch's shuffled order and the position in it."""

    epoch: int = 0
    position: int = 0

    def take(self, dataset: Sequence[EnvTask], count: int, seed: int) -> list[EnvTask]:
        taken: list[EnvTask] = []
        while len(taken) < count:
            order = list(range(len(dataset)))
            random.Random(seed * 1_000_003 + self.epoch).shuffle(order)
            while self.position < len(order) and len(taken) < count:
                taken.append(dataset[order[self.position]])
                self.position += 1
            if self.position >= len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return taken


@dataclass(slots=True)
class _OpenStep:
    """What one step has produced so far, phase by phase."""

    step: int
    tasks: list[EnvTask]
    bounds: list[int]
    """Worker ``w`` rolls out tasks ``bounds[w]:bounds[w + 1]``."""
    sampling: SamplingParams
    cursor: DataCursor
    """Where the data was before this step took its tasks (what a checkpoint before it keeps)."""
    started_s: float
    batches: list[EpisodeBatch | None] = field(default_factory=list)
    """Each worker's episodes, from when its engine starts them."""
    sampled: dict[str, SampledTurn] = field(default_factory=dict)
    """Per finished request: its tokens' log-probs and the policy version that sampled them."""
    samples: list[dict[str, Any]] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    """Per kept episode, the policy version that generated it (asynchronous jobs)."""
    sampled_logp: dict[int, list[float]] = field(default_factory=dict)
    """Per kept episode (row) generated by an older policy than the one training it: its
    tokens' sampling log-probs (asynchronous jobs)."""
    behav_logp: torch.Tensor | None = None
    timings: dict[names.TimedStage, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    episodes: list[EpisodeResult] = field(default_factory=list)
    batch: TokenBatch | None = None
    rewards: torch.Tensor | None = None
    group_ids: torch.Tensor | None = None
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    values: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    critic_metrics: dict[str, float] = field(default_factory=dict)
    plan: list[torch.Tensor] = field(default_factory=list)
    next_update: int = 0
    actor_metrics: list[dict[str, float]] = field(default_factory=list)


def sequence_plan(episode: EpisodeResult) -> SequencePlan:
    """An episode in the simulator's terms: prompt, tokens per turn, tool waits between turns."""
    prompt = episode.sample.model_written.index(True) if True in episode.sample.model_written else 0
    observations = episode.observation_tokens
    return SequencePlan(
        prompt_tokens=prompt,
        turn_tokens=episode.turn_tokens or (episode.response_tokens,),
        tool_waits_s=episode.tool_waits_s,
        tool_output_tokens=round(sum(observations) / len(observations)) if observations else 0,
    )


class RLJob:
    """An RL job whose step is a sequence of phases a runtime can run one at a time.

    ``engines`` are the data-parallel rollout workers: the step's tasks are split among them in
    contiguous shards. :meth:`run_step` runs every phase in order; a runtime driven by the
    scheduler calls the phases itself (rollout per worker and decode bucket, score, log-probs,
    a slice of the update, weight sync), and both give the same step. Phases that name a
    ``step`` act on that open step (an asynchronous job has several); without one, on the
    oldest open step, the next to train. Rollout phases of different steps and workers may run
    on different threads at once; training phases run one at a time, in step order.
    """

    def __init__(
        self,
        *,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerFast,
        env: Environment,
        engine: RolloutEngine | None = None,
        engines: Sequence[RolloutEngine] = (),
        config: RLJobConfig,
        trainer: ActorTrainer | None = None,
        critic: ValueTrainer | None = None,
    ) -> None:
        """``trainer``: the policy's trainer when it is not this process (a worker group built
        from ``model`` and ``config.actor``); by default one in this process. ``critic``
        likewise for PPO's critic (built from ``model`` and ``config.critic``)."""
        if critic is not None and config.critic is None:
            raise ValueError("critic: only a job whose config has a critic (PPO, 'gae') takes one")
        self.tokenizer = tokenizer
        self._model_template = model
        """What exports take the architecture from (its weights may be the start policy's)."""
        self.env = env
        self.engines: list[RolloutEngine] = [engine] if engine is not None else list(engines)
        if not self.engines:
            raise ValueError("engines: a job needs at least one rollout engine")
        self._workers = RolloutWorkers(self.engines)
        self._memory_fallback_logged = False
        self.config = config
        self.trainer: ActorTrainer = trainer or PolicyTrainer(
            model, config.actor, keep_reference=config.kl_in_reward_coef > 0
        )
        self.critic: ValueTrainer | None = critic
        if critic is None and config.critic is not None:
            self.critic = CriticTrainer(model, config.critic)
        self.step = 0
        """Steps trained: the next step to train, and the policy version the trainer holds."""
        self.recent_samples: list[dict[str, Any]] = []
        """A few of the last finished step's completions (one per prompt), with their rewards."""
        self.cursor = DataCursor()
        self._dataset = env.dataset()
        if not self._dataset:
            raise ValueError(f"env {env.name!r}: the dataset is empty")
        self._open: dict[int, _OpenStep] = {}
        self._next_step = 0
        self._lock = threading.Lock()
        """Guards the open steps and the data cursor (rollouts of several steps run at once)."""
        self.step_plans: dict[int, list[SequencePlan]] = {}
        """Each step's sequences as the simulator describes them: what the fidelity check replays."""

    def run_step(self) -> dict[str, float]:
        """One synchronous step; its metrics (verl's names) plus ``training/global_step``."""
        step = self.begin_step()
        for worker in range(self.step_workers):
            self.rollout(worker, step=step)
        self.score(step=step)
        self.old_log_probs()
        self.ref_log_probs()
        self.train(1, 1)
        return self.sync_weights()

    # -- phases --------------------------------------------------------------------------------
    @property
    def open_steps(self) -> list[int]:
        """The steps begun and not yet trained, oldest first."""
        with self._lock:
            return sorted(self._open)

    @property
    def next_step(self) -> int:
        """The step :meth:`begin_step` opens next."""
        return self._next_step

    def begin_step(self, workers: int | None = None, *, step: int | None = None) -> int:
        """Open the next step: take its tasks, and queue the first-turn requests of ``workers``
        workers (the first engines; all by default) on every engine that is free (a busy one's
        start when its worker first rolls this step out). Sampling is per episode, so the width
        never changes what is generated, only where. Returns the step.

        Refused when the step would run more than ``staleness`` steps ahead of training, and
        when ``step`` (if given) is not the next one."""
        shards = len(self.engines) if workers is None else workers
        if not 1 <= shards <= len(self.engines):
            raise ValueError(f"workers: must be 1..{len(self.engines)} (the job's engines), got {workers}")
        cfg = self.config
        with self._lock:
            self._check_ahead(self._next_step if step is None else step)
            if step is not None and step != self._next_step:
                raise StepOrderError(f"step {step}'s rollout cannot begin before step {self._next_step}'s")
            step = self._next_step
            before = DataCursor(self.cursor.epoch, self.cursor.position)
            tasks = self.cursor.take(self._dataset, cfg.prompts_per_step, cfg.seed)
            sampling = SamplingParams(
                max_tokens=cfg.max_response_tokens, temperature=cfg.temperature, seed=cfg.seed * 7919 + step * 104_729
            )
            bounds = [round(i * len(tasks) / shards) for i in range(shards + 1)]
            open_step = _OpenStep(step, tasks, bounds, sampling, before, time.perf_counter(), [None] * shards)
            self._open[step] = open_step
            self._next_step = step + 1
        for worker in range(shards):
            self._start_if_free(open_step, worker)
        return step

    def _check_ahead(self, step: int) -> None:
        k = self.config.staleness
        if step - self.step > k:
            raise StepOrderError(
                f"step {step}'s rollout would run {step - self.step} steps ahead of training (step {self.step} "
                f"trains next); staleness {k} allows at most {k}"
                + ("" if k else ": a synchronous job rolls out only the step it trains next")
            )

    def engine_version(self, worker: int) -> int:
        """The policy version ``worker``'s engine holds: the updates its weights have had."""
        return self._workers.version(worker)

    @property
    def step_workers(self) -> int:
        """Rollout workers of the oldest open step."""
        return self.workers_of(None)

    def workers_of(self, step: int | None) -> int:
        """Rollout workers of open step ``step`` (None: the oldest)."""
        return len(self._require_open(step).batches)

    def live_episodes(self, worker: int, *, step: int | None = None) -> tuple[int, int]:
        """(unfinished, total) episodes of ``worker`` in open step ``step``."""
        open_step = self._require_open(step)
        batch = open_step.batches[worker]
        if batch is None:
            total = (open_step.bounds[worker + 1] - open_step.bounds[worker]) * self.config.n
            return total, total
        return batch.live, batch.size

    def start_rollout(self, worker: int, *, step: int | None = None) -> None:
        """Queue ``worker``'s first-turn requests of open step ``step`` (once), finishing first
        whatever another step still has on its engine."""
        open_step = self._require_open(step)
        with self._workers.hold(worker):
            self._batch(open_step, worker)

    def rollout(self, worker: int, *, until_live_at_most: int = 0, step: int | None = None) -> None:
        """Generate on ``worker`` until at most ``until_live_at_most`` of its episodes are unfinished."""
        open_step = self._require_open(step)
        started = time.perf_counter()
        failpoint("rollout.mid_generation")
        with self._workers.hold(worker):
            self._batch(open_step, worker).advance(until_live_at_most=until_live_at_most)
        open_step.timings["gen"] = open_step.timings.get("gen", 0.0) + time.perf_counter() - started

    def migrate_tails(self, source: int, target: int, *, step: int | None = None) -> int:
        """Consolidate ``source``'s unfinished episodes onto ``target``: ``source``'s engine is
        then free for other work. Returns how many episodes moved."""
        open_step = self._require_open(step)
        with self._workers.hold(source, target):
            return self._batch(open_step, source).hand_over_to(self._batch(open_step, target))

    def _start_if_free(self, open_step: _OpenStep, worker: int) -> None:
        """Start ``worker``'s episodes now unless its engine is busy (another thread holds it,
        or another step's episodes are unfinished there): its own rollout starts them then."""
        with self._lock:
            others = [o.batches[worker] for o in self._open.values() if o is not open_step and worker < len(o.batches)]
        with self._workers.holding_if_free(worker) as free:
            if free and not any(batch is not None and batch.live for batch in others):
                self._batch(open_step, worker)

    def _batch(self, open_step: _OpenStep, worker: int) -> EpisodeBatch:
        """``worker``'s episodes of ``open_step``, started on its engine now if not yet (hold it)."""
        batch = open_step.batches[worker]
        if batch is not None:
            return batch
        cfg, first, end = self.config, open_step.bounds[worker], open_step.bounds[worker + 1]

        def make(engine: RecordingEngine) -> EpisodeBatch:
            behind = open_step.step - self._workers.version(worker)
            if behind > cfg.staleness:
                raise StepOrderError(
                    f"worker {worker}'s engine holds policy version {self._workers.version(worker)}: step "
                    f"{open_step.step}'s rollout would lag {behind} updates, past staleness {cfg.staleness}"
                )
            return EpisodeBatch(
                engine,
                self.env,
                self.tokenizer,
                open_step.tasks[first:end],
                n=cfg.n,
                sampling=open_step.sampling,
                request_prefix=f"s{open_step.step}-",
                first_group=first,
            )

        batch = self._workers.start(worker, make, open_step.sampled)
        open_step.batches[worker] = batch
        return batch

    def score(self, *, step: int | None = None) -> None:
        """Rewards (with the overlong penalty), DAPO's group filter, and the padded batch."""
        cfg, open_step = self.config, self._require_open(step)
        started = time.perf_counter()
        for worker, batch in enumerate(open_step.batches):  # what no decode node finished (no bucket left)
            if batch is None or batch.live:
                with self._workers.hold(worker):
                    self._batch(open_step, worker).advance()
        open_step.timings["gen"] = open_step.timings.get("gen", 0.0) + time.perf_counter() - started
        # By (task, index), not by worker: where an episode finished (after a migration) must
        # not change the batch the trainer sees.
        episodes = sorted(
            (e for batch in open_step.batches if batch is not None for e in batch.results()),
            key=lambda e: (e.group, e.index),
        )
        self.step_plans[open_step.step] = [sequence_plan(e) for e in episodes]
        scores = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
        group_ids = torch.tensor([e.group for e in episodes], dtype=torch.long)
        rewards = scores + self._overlong_penalty(episodes)
        counts = count_informative_groups(rewards, group_ids)
        keep = (
            informative_groups(rewards, group_ids)
            if cfg.dynamic_sampling
            else torch.ones_like(scores, dtype=torch.bool)
        )
        open_step.metrics.update(
            {
                "training/global_step": float(open_step.step + 1),
                "rollout/tool_s": sum(b.tool_s for b in open_step.batches if b is not None),
                "rollout/groups_informative": float(counts.kept_groups),
                "rollout/groups_dropped": float(counts.dropped_groups if cfg.dynamic_sampling else 0),
                names.SCORE_MEAN: float(scores.mean()),
                names.REWARD_FAILURES: float(sum(1 for e in episodes if e.reward_error)),
            }
        )
        open_step.samples = [self._sample_of(e) for e in _samples_to_show(episodes)]
        open_step.episodes = [e for e, k in zip(episodes, keep.tolist(), strict=True) if k]
        if cfg.staleness > 0:
            self._record_behaviour(open_step, episodes)
        if open_step.episodes:
            pad = int(self.tokenizer.pad_token_id)
            open_step.batch = collate([e.sample for e in open_step.episodes], pad_token_id=pad)
            open_step.rewards, open_step.group_ids = rewards[keep], group_ids[keep]
        open_step.metrics["perf/total_num_tokens"] = float(sum(len(e.sample.token_ids) for e in episodes))

    def _record_behaviour(self, open_step: _OpenStep, episodes: list[EpisodeResult]) -> None:
        """Which policy version generated each episode, and, for the episodes an older policy
        than the one that will train them generated (step ``s`` trains with version ``s``),
        the log-probs their tokens were sampled with: the decoupled loss's behaviour policy."""
        sampled = {(e.group, e.index): behaviour_turns(e, f"s{open_step.step}-", open_step.sampled) for e in episodes}
        lags = [open_step.step - version for _, version in sampled.values()]
        for row, episode in enumerate(open_step.episodes):
            logprobs, version = sampled[(episode.group, episode.index)]
            open_step.versions.append(version)
            if version < open_step.step:
                open_step.sampled_logp[row] = logprobs
        open_step.metrics[names.POLICY_LAG_MEAN] = sum(lags) / len(lags) if lags else 0.0
        open_step.metrics[names.POLICY_LAG_MAX] = float(max(lags, default=0))

    def _sample_of(self, episode: EpisodeResult) -> dict[str, Any]:
        """What the job's samples show of one episode (``reward_error``: why its reward failed, or empty)."""
        written = [t for t, w in zip(episode.sample.token_ids, episode.sample.model_written, strict=True) if w]
        first_reply = episode.sample.model_written.index(True) if written else len(episode.sample.token_ids)
        return {
            # As the model read it: the conversation rendered by the policy's chat template.
            "prompt": self.tokenizer.decode(list(episode.sample.token_ids[:first_reply])),
            "completion": self.tokenizer.decode(written, skip_special_tokens=True),
            "answer": episode.task.answer,
            "reward": float(episode.reward),
            "turns": episode.num_turns,
            "response_tokens": episode.response_tokens,
            "reward_error": episode.reward_error,
        }

    def generate_for_validation(self, env: Environment, *, n: int, temperature: float) -> list[EpisodeResult]:
        """``n`` graded replies to every row of ``env`` from the policy trained so far, on the
        first rollout engine (it takes the newest weights first); by (row, reply). Seeds depend
        on the job's seed and ``self.step`` only, so a pass replays identically."""
        tasks = list(env.dataset())
        sampling = SamplingParams(
            max_tokens=self.config.max_response_tokens,
            temperature=temperature,
            seed=self.config.seed * 7919 + self.step * 104_729 + VALIDATION_SEED_OFFSET,
        )

        def make(engine: RecordingEngine) -> EpisodeBatch:
            return EpisodeBatch(
                engine, env, self.tokenizer, tasks, n=n, sampling=sampling, request_prefix=f"val{self.step}-"
            )

        with self._workers.hold(0):
            batch = self._workers.start(0, make, {})
            batch.advance()
        return batch.results()

    def decode_reply(self, episode: EpisodeResult) -> tuple[str, str]:
        """(prompt as the model read it, what the model wrote) of one episode."""
        sample = self._sample_of(episode)
        return str(sample["prompt"]), str(sample["completion"])

    def scored_episodes(self, *, step: int | None = None) -> list[EpisodeResult]:
        """The open step's episodes that will be trained on (after :meth:`score`)."""
        return list(self._require_open(step).episodes)

    def policy_versions(self, *, step: int | None = None) -> list[int]:
        """The policy version that generated each of :meth:`scored_episodes` (asynchronous jobs)."""
        return list(self._require_open(step).versions)

    def old_log_probs(self, *, step: int | None = None) -> None:
        """The proximal policy's log-probs: the current weights, before this step's update."""
        open_step = self._training(step)
        if open_step.batch is None:
            return
        started = time.perf_counter()
        open_step.old_logp = self.trainer.old_log_probs(open_step.batch)
        if self.critic is not None:
            open_step.values = self.critic.values(open_step.batch)
        open_step.timings["old_log_prob"] = time.perf_counter() - started

    def ref_log_probs(self, *, step: int | None = None) -> None:
        open_step = self._training(step)
        if open_step.batch is None or self.trainer.reference is None:
            return
        started = time.perf_counter()
        open_step.ref_logp = self.trainer.ref_log_probs(open_step.batch)
        open_step.timings["ref"] = time.perf_counter() - started

    def train(self, part: int, parts: int, *, step: int | None = None) -> None:
        """Run part ``part`` (1-based) of ``parts`` of the update's optimizer steps."""
        open_step = self._training(step)
        if open_step.batch is None:
            return
        if open_step.advantages is None:
            self._advantages(open_step)
        assert open_step.advantages is not None and open_step.old_logp is not None
        if self.config.staleness > 0 and open_step.behav_logp is None:
            open_step.behav_logp = behaviour_log_probs(
                open_step.old_logp, open_step.batch.response_mask, open_step.sampled_logp
            )
        if self.config.colocated and open_step.next_update == 0:
            self._release_rollout_memory(open_step)
        started = time.perf_counter()
        if self.critic is not None and not open_step.critic_metrics:
            # verl's order: the critic learns from this step's returns before the actor updates.
            assert open_step.returns is not None and open_step.values is not None
            open_step.critic_metrics = self.critic.update(open_step.batch, open_step.returns, open_step.values)
        plan = open_step.plan
        upto = round(part * len(plan) / parts)
        while open_step.next_update < upto:
            rows = plan[open_step.next_update]
            inputs = (open_step.batch, open_step.advantages, open_step.old_logp, open_step.ref_logp, rows)
            open_step.actor_metrics.append(
                self.trainer.optimizer_step(*inputs)
                if open_step.behav_logp is None
                else self.trainer.optimizer_step(*inputs, open_step.behav_logp)
            )
            open_step.next_update += 1
            failpoint("train.mid_update")  # the weights have moved; the step is not checkpointed
        open_step.timings["update_actor"] = open_step.timings.get("update_actor", 0.0) + time.perf_counter() - started

    def _release_rollout_memory(self, open_step: _OpenStep) -> None:
        """The update is about to run on the devices the rollout engines share with it: idle
        engines give their memory back (each takes it again before its next batch)."""
        said = self._workers.release_idle()
        released = sum(answer == MEMORY_RELEASED for answer in said)
        open_step.metrics[names.ROLLOUT_MEMORY_RELEASED] = released / max(1, len(said))
        kept = sorted({answer for answer in said if answer != MEMORY_RELEASED and not answer.startswith("kept")})
        if kept and not self._memory_fallback_logged:
            logger.info("rollout engines keep their memory while the job trains: %s", "; ".join(kept))
            self._memory_fallback_logged = True

    def sync_weights(self, *, step: int | None = None) -> dict[str, float]:
        """Finish any update left, push the weights to the engines, close the step: its metrics.
        An engine generating another step's episodes takes the weights before its next batch."""
        open_step = self._training(step)
        unfinished = open_step.advantages is None or open_step.next_update < len(open_step.plan)
        if open_step.batch is not None and unfinished:
            self.train(1, 1, step=open_step.step)
        started = time.perf_counter()
        # Even unchanged weights (nothing trained): the engines then hold version step + 1 too.
        self._workers.push(self.trainer.weights(), open_step.step + 1)
        open_step.timings["sync"] = time.perf_counter() - started
        metrics = open_step.metrics
        metrics.update(mean_metrics(open_step.actor_metrics))
        metrics.update(open_step.critic_metrics)
        if open_step.batch is not None and open_step.advantages is not None and open_step.rewards is not None:
            metrics.update(self._data_metrics(open_step))
        open_step.timings["step"] = time.perf_counter() - open_step.started_s
        metrics.update(names.compute_timing_metrics(open_step.timings))
        metrics.update(
            names.compute_throughput_metrics(
                total_num_tokens=int(metrics["perf/total_num_tokens"]), step_seconds=open_step.timings["step"]
            )
        )
        self.recent_samples = open_step.samples
        with self._lock:
            del self._open[open_step.step]
            self.step += 1
        return metrics

    # -- helpers -------------------------------------------------------------------------------
    def _push_weights(self) -> None:
        """The trainer's weights to every rollout worker now (after a restore)."""
        self._workers.load_everywhere(self.trainer.weights(), self.step)

    def _require_open(self, step: int | None = None) -> _OpenStep:
        with self._lock:
            if step is None:
                step = min(self._open, default=None)
            open_step = self._open.get(step) if step is not None else None
        if open_step is None:
            if step is None:
                raise StepOrderError(f"no step is open; call begin_step() first (next step is {self._next_step})")
            raise StepOrderError(f"step {step} is not open (open: {self.open_steps}, next to begin: {self._next_step})")
        return open_step

    def _training(self, step: int | None) -> _OpenStep:
        """The step a training phase acts on: the oldest open one, which must have been scored."""
        open_step = self._require_open(step)
        if open_step.step != self.step:
            raise StepOrderError(f"step {open_step.step} cannot train before step {self.step}: steps train in order")
        if not open_step.metrics:
            raise StepOrderError(f"step {open_step.step} is not scored yet; its rollout must finish first (score())")
        return open_step

    def _advantages(self, open_step: _OpenStep) -> None:
        cfg = self.config
        assert open_step.batch is not None and open_step.rewards is not None and open_step.old_logp is not None
        started = time.perf_counter()
        kl_penalty = None
        if cfg.kl_in_reward_coef > 0 and open_step.ref_logp is not None:
            kl_penalty = cfg.kl_in_reward_coef * estimate_kl(open_step.old_logp, open_step.ref_logp, estimator="k1")
        if cfg.critic is not None:
            assert open_step.values is not None
            token_rewards = outcome_token_rewards(open_step.rewards, open_step.batch.response_mask)
            if kl_penalty is not None:
                token_rewards = token_rewards - kl_penalty * open_step.batch.response_mask
            open_step.advantages, open_step.returns = gae_advantages(
                token_rewards,
                open_step.values,
                open_step.batch.response_mask,
                gamma=cfg.critic.gamma,
                lam=cfg.critic.lam,
            )
        else:
            open_step.advantages = compute_advantages(
                cfg.adv_estimator,
                scores=open_step.rewards,
                response_mask=open_step.batch.response_mask,
                group_ids=open_step.group_ids,
                kl_penalty=kl_penalty,
                normalize_by_std=cfg.norm_adv_by_std,
            )
        open_step.plan = self.trainer.plan_updates(open_step.batch.size, seed=cfg.seed + self.step)
        open_step.timings["adv"] = time.perf_counter() - started

    def _data_metrics(self, open_step: _OpenStep) -> dict[str, float]:
        assert open_step.batch is not None and open_step.advantages is not None and open_step.rewards is not None
        prompt_lengths = torch.tensor(
            [e.sample.model_written.index(True) for e in open_step.episodes], dtype=torch.float32
        )
        return names.compute_data_metrics(
            scores=open_step.rewards,
            advantages=open_step.advantages,
            response_mask=open_step.batch.response_mask,
            prompt_lengths=prompt_lengths,
            max_response_length=self.config.max_response_tokens,
            truncated=torch.tensor([e.truncated for e in open_step.episodes]),
        )

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, root: Path) -> Path:
        """Write everything a resume needs after ``self.step`` steps, and the policy as a
        Hugging Face directory (:data:`MODEL_FOLDER`); atomic (a rename).

        The per-step randomness is derived from ``(seed, step)``, so the step, the cursor and
        the trainer state are the whole of it; torch's global RNG is saved too for any caller
        that draws from it.
        """
        root.mkdir(parents=True, exist_ok=True)
        final = root / f"step-{self.step:06d}"
        staging = root / f".staging-{self.step:06d}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        trainer_state = self.trainer.state_dict()
        state = {"trainer": trainer_state, "torch_rng": torch.get_rng_state()}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
        torch.save(state, staging / "state.pt")
        # The policy as a tenant takes it out: the trainer's whole weights, as Hugging Face loads them.
        export_policy(self._model_template, trainer_state["model"], self.tokenizer, staging / MODEL_FOLDER)
        with self._lock:  # the data before the next step took its tasks (later steps may be open)
            cursor = self._open[self.step].cursor if self.step in self._open else self.cursor
        meta = {"step": self.step, "cursor": asdict(cursor), "seed": self.config.seed, "env": self.env.name}
        (staging / "job.json").write_text(json.dumps(meta, indent=2))
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        latest = root / "latest"
        (root / ".latest.tmp").write_text(final.name)
        (root / ".latest.tmp").replace(latest)
        return final

    def restore_checkpoint(self, root: Path, step: int | None = None) -> bool:
        """Continue from the latest checkpoint under ``root`` (False when there is none), or
        from exactly the one after ``step`` steps (a ValueError when it is missing)."""
        if self._open:
            raise RuntimeError(f"cannot restore a checkpoint while steps {self.open_steps} are open")
        if step is not None:
            folder = root / f"step-{step:06d}"
            if not (folder / "job.json").is_file():
                raise ValueError(
                    f"checkpoint of step {step} not found under {root}; a real job resumes only from "
                    "its own checkpoints (set the engine's real checkpoint folder and keep it)"
                )
        else:
            latest = root / "latest"
            if not latest.is_file():
                return False
            folder = root / latest.read_text().strip()
        meta = json.loads((folder / "job.json").read_text())
        if meta["seed"] != self.config.seed or meta["env"] != self.env.name:
            raise ValueError(
                f"checkpoint {folder}: written by a job with seed {meta['seed']} on env {meta['env']!r}, "
                f"not seed {self.config.seed} on {self.env.name!r}; point the job at its own checkpoint folder"
            )
        state = torch.load(folder / "state.pt", weights_only=False)
        self.trainer.load_state_dict(state["trainer"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"])
        torch.set_rng_state(state["torch_rng"])
        self.step = self._next_step = int(meta["step"])
        self.cursor = DataCursor(**meta["cursor"])
        self._push_weights()
        return True

    def _overlong_penalty(self, episodes: list[EpisodeResult]) -> torch.Tensor:
        cfg = self.config
        if cfg.overlong_buffer_tokens == 0:
            return torch.zeros(len(episodes))
        lengths = torch.tensor([e.response_tokens for e in episodes], dtype=torch.float32)
        return overlong_penalty(lengths, max_length=cfg.max_response_tokens, buffer_length=cfg.overlong_buffer_tokens)


def _samples_to_show(episodes: Sequence[EpisodeResult]) -> list[EpisodeResult]:
    """The first reply of the first few groups; where the reward failed on some reply and none of
    those shows it, the first failure takes the last place, so its reason is seen."""
    shown = [e for e in episodes if e.index == 0][:SAMPLES_PER_STEP]
    failed = next((e for e in episodes if e.reward_error), None)
    if failed is not None and shown and not any(e.reward_error for e in shown):
        shown[-1] = failed
    return shown
