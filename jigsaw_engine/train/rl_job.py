"""One RL post-training job on one process: rollout, reward, advantages, update, weight sync.

:meth:`RLJob.run_step` is a whole synchronous step, in verl's order, with each phase timed
under verl's metric names. The job keeps everything needed to resume (policy, optimizer, data
cursor, RNG, step) and writes it atomically, so a job killed mid-step restarts that step from
the last checkpoint and neither loses nor repeats one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import Environment, EnvTask
from jigsaw_engine.failpoints import failpoint
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rl.advantages import AdvantageEstimator, compute_advantages, gae_advantages, outcome_token_rewards
from jigsaw_engine.rl.dapo import count_informative_groups, informative_groups, overlong_penalty
from jigsaw_engine.rl.kl import estimate_kl
from jigsaw_engine.rollout.protocol import RolloutEngine, SamplingParams
from jigsaw_engine.train.critic import CriticConfig, CriticTrainer, ValueTrainer
from jigsaw_engine.train.episodes import EpisodeBatch, EpisodeResult
from jigsaw_engine.train.policy_trainer import ActorConfig, ActorTrainer, PolicyTrainer, mean_metrics
from jigsaw_engine.train.token_batch import TokenBatch, collate
from jigsaw_engine.workload.plans import SequencePlan

SAMPLES_PER_STEP = 4
"""Completions kept per step for people to read (the dashboard's samples)."""


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
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "n", "max_response_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
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

    tasks: list[EnvTask]
    batches: list[EpisodeBatch]
    started_s: float
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
    """A synchronous RL job whose step is a sequence of phases a runtime can run one at a time.

    ``engines`` are the data-parallel rollout workers: the step's tasks are split among them in
    contiguous shards. :meth:`run_step` runs every phase in order; a runtime driven by the
    scheduler calls the phases itself (rollout per worker and decode bucket, score, log-probs,
    a slice of the update, weight sync), and both give the same step.
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
        self.env = env
        self.engines: list[RolloutEngine] = [engine] if engine is not None else list(engines)
        if not self.engines:
            raise ValueError("engines: a job needs at least one rollout engine")
        self.config = config
        self.trainer: ActorTrainer = trainer or PolicyTrainer(
            model, config.actor, keep_reference=config.kl_in_reward_coef > 0
        )
        self.critic: ValueTrainer | None = critic
        if critic is None and config.critic is not None:
            self.critic = CriticTrainer(model, config.critic)
        self.step = 0
        self.recent_samples: list[dict[str, Any]] = []
        """A few of the last scored step's completions (one per prompt), with their rewards."""
        self.cursor = DataCursor()
        self._dataset = env.dataset()
        if not self._dataset:
            raise ValueError(f"env {env.name!r}: the dataset is empty")
        self._open: _OpenStep | None = None
        self.step_plans: dict[int, list[SequencePlan]] = {}
        """Each step's sequences as the simulator describes them: what the fidelity check replays."""

    def run_step(self) -> dict[str, float]:
        """One synchronous step; its metrics (verl's names) plus ``training/global_step``."""
        self.begin_step()
        for worker in range(self.step_workers):
            self.rollout(worker)
        self.score()
        self.old_log_probs()
        self.ref_log_probs()
        self.train(1, 1)
        return self.sync_weights()

    # -- phases --------------------------------------------------------------------------------
    def begin_step(self, workers: int | None = None) -> None:
        """Take this step's tasks and queue the first-turn requests of ``workers`` workers (the
        first engines; all by default). Sampling is per episode, so the width never changes
        what is generated, only where."""
        if self._open is not None:
            raise RuntimeError(f"step {self.step} is already open; finish it with sync_weights()")
        shards = len(self.engines) if workers is None else workers
        if not 1 <= shards <= len(self.engines):
            raise ValueError(f"workers: must be 1..{len(self.engines)} (the job's engines), got {workers}")
        cfg = self.config
        tasks = self.cursor.take(self._dataset, cfg.prompts_per_step, cfg.seed)
        sampling = SamplingParams(
            max_tokens=cfg.max_response_tokens, temperature=cfg.temperature, seed=cfg.seed * 7919 + self.step * 104_729
        )
        bounds = [round(i * len(tasks) / shards) for i in range(shards + 1)]
        batches = [
            EpisodeBatch(
                engine,
                self.env,
                self.tokenizer,
                tasks[bounds[w] : bounds[w + 1]],
                n=cfg.n,
                sampling=sampling,
                request_prefix=f"s{self.step}-",
                first_group=bounds[w],
            )
            for w, engine in enumerate(self.engines[:shards])
        ]
        self._open = _OpenStep(tasks=tasks, batches=batches, started_s=time.perf_counter())

    @property
    def step_workers(self) -> int:
        """Rollout workers of the open step."""
        return len(self._require_open().batches)

    def live_episodes(self, worker: int) -> tuple[int, int]:
        """(unfinished, total) episodes of ``worker`` in the open step."""
        batch = self._require_open().batches[worker]
        return batch.live, batch.size

    def rollout(self, worker: int, *, until_live_at_most: int = 0) -> None:
        """Generate on ``worker`` until at most ``until_live_at_most`` of its episodes are unfinished."""
        open_step = self._require_open()
        started = time.perf_counter()
        failpoint("rollout.mid_generation")
        open_step.batches[worker].advance(until_live_at_most=until_live_at_most)
        open_step.timings["gen"] = open_step.timings.get("gen", 0.0) + time.perf_counter() - started

    def migrate_tails(self, source: int, target: int) -> int:
        """Consolidate ``source``'s unfinished episodes onto ``target``: ``source``'s engine is
        then free for other work. Returns how many episodes moved."""
        open_step = self._require_open()
        return open_step.batches[source].hand_over_to(open_step.batches[target])

    def score(self) -> None:
        """Rewards (with the overlong penalty), DAPO's group filter, and the padded batch."""
        cfg, open_step = self.config, self._require_open()
        # By (task, index), not by worker: where an episode finished (after a migration) must
        # not change the batch the trainer sees.
        episodes = sorted((e for batch in open_step.batches for e in batch.results()), key=lambda e: (e.group, e.index))
        self.step_plans[self.step] = [sequence_plan(e) for e in episodes]
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
                "training/global_step": float(self.step + 1),
                "rollout/tool_s": sum(b.tool_s for b in open_step.batches),
                "rollout/groups_informative": float(counts.kept_groups),
                "rollout/groups_dropped": float(counts.dropped_groups if cfg.dynamic_sampling else 0),
                names.SCORE_MEAN: float(scores.mean()),
            }
        )
        self.recent_samples = [self._sample_of(e) for e in episodes if e.index == 0][:SAMPLES_PER_STEP]
        open_step.episodes = [e for e, k in zip(episodes, keep.tolist(), strict=True) if k]
        if open_step.episodes:
            pad = int(self.tokenizer.pad_token_id)
            open_step.batch = collate([e.sample for e in open_step.episodes], pad_token_id=pad)
            open_step.rewards, open_step.group_ids = rewards[keep], group_ids[keep]
        open_step.metrics["perf/total_num_tokens"] = float(sum(len(e.sample.token_ids) for e in episodes))

    def _sample_of(self, episode: EpisodeResult) -> dict[str, Any]:
        written = [t for t, w in zip(episode.sample.token_ids, episode.sample.model_written, strict=True) if w]
        return {
            "prompt": episode.task.prompt,
            "completion": self.tokenizer.decode(written, skip_special_tokens=True),
            "answer": episode.task.answer,
            "reward": float(episode.reward),
            "turns": episode.num_turns,
        }

    def scored_episodes(self) -> list[EpisodeResult]:
        """The open step's episodes that will be trained on (after :meth:`score`)."""
        return list(self._require_open().episodes)

    def old_log_probs(self) -> None:
        open_step = self._require_open()
        if open_step.batch is None:
            return
        started = time.perf_counter()
        open_step.old_logp = self.trainer.old_log_probs(open_step.batch)
        if self.critic is not None:
            open_step.values = self.critic.values(open_step.batch)
        open_step.timings["old_log_prob"] = time.perf_counter() - started

    def ref_log_probs(self) -> None:
        open_step = self._require_open()
        if open_step.batch is None or self.trainer.reference is None:
            return
        started = time.perf_counter()
        open_step.ref_logp = self.trainer.ref_log_probs(open_step.batch)
        open_step.timings["ref"] = time.perf_counter() - started

    def train(self, part: int, parts: int) -> None:
        """Run part ``part`` (1-based) of ``parts`` of the update's optimizer steps."""
        open_step = self._require_open()
        if open_step.batch is None:
            return
        if open_step.advantages is None:
            self._advantages(open_step)
        assert open_step.advantages is not None and open_step.old_logp is not None
        started = time.perf_counter()
        if self.critic is not None and not open_step.critic_metrics:
            # verl's order: the critic learns from this step's returns before the actor updates.
            assert open_step.returns is not None and open_step.values is not None
            open_step.critic_metrics = self.critic.update(open_step.batch, open_step.returns, open_step.values)
        plan = open_step.plan
        upto = round(part * len(plan) / parts)
        while open_step.next_update < upto:
            rows = plan[open_step.next_update]
            open_step.actor_metrics.append(
                self.trainer.optimizer_step(
                    open_step.batch, open_step.advantages, open_step.old_logp, open_step.ref_logp, rows
                )
            )
            open_step.next_update += 1
            failpoint("train.mid_update")  # the weights have moved; the step is not checkpointed
        open_step.timings["update_actor"] = open_step.timings.get("update_actor", 0.0) + time.perf_counter() - started

    def sync_weights(self) -> dict[str, float]:
        """Finish any update left, push the weights to every engine, close the step: its metrics."""
        open_step = self._require_open()
        unfinished = open_step.advantages is None or open_step.next_update < len(open_step.plan)
        if open_step.batch is not None and unfinished:
            self.train(1, 1)
        started = time.perf_counter()
        if open_step.actor_metrics:
            self._push_weights()
        open_step.timings["update_actor"] = open_step.timings.get("update_actor", 0.0) + time.perf_counter() - started
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
        self._open = None
        self.step += 1
        return metrics

    # -- helpers -------------------------------------------------------------------------------
    def _push_weights(self) -> None:
        """The trainer's weights to every rollout worker (after an update, after a restore)."""
        weights = self.trainer.weights()
        for engine in self.engines:
            engine.load_weights(weights)

    def _require_open(self) -> _OpenStep:
        if self._open is None:
            raise RuntimeError(f"no step is open; call begin_step() first (next step is {self.step})")
        return self._open

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
        """Write everything a resume needs after ``self.step`` steps; atomic (a rename).

        The per-step randomness is derived from ``(seed, step)``, so the step, the cursor and
        the trainer state are the whole of it; torch's global RNG is saved too for any caller
        that draws from it.
        """
        root.mkdir(parents=True, exist_ok=True)
        final = root / f"step-{self.step:06d}"
        staging = root / f".staging-{self.step:06d}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        state = {"trainer": self.trainer.state_dict(), "torch_rng": torch.get_rng_state()}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
        torch.save(state, staging / "state.pt")
        meta = {"step": self.step, "cursor": asdict(self.cursor), "seed": self.config.seed, "env": self.env.name}
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
        self.step = int(meta["step"])
        self.cursor = DataCursor(**meta["cursor"])
        self._push_weights()
        return True

    def _overlong_penalty(self, episodes: list[EpisodeResult]) -> torch.Tensor:
        cfg = self.config
        if cfg.overlong_buffer_tokens == 0:
            return torch.zeros(len(episodes))
        lengths = torch.tensor([e.response_tokens for e in episodes], dtype=torch.float32)
        return overlong_penalty(lengths, max_length=cfg.max_response_tokens, buffer_length=cfg.overlong_buffer_tokens)
