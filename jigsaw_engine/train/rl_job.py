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

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import Environment, EnvTask
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rl.advantages import AdvantageEstimator, compute_advantages
from jigsaw_engine.rl.dapo import count_informative_groups, informative_groups, overlong_penalty
from jigsaw_engine.rl.kl import estimate_kl
from jigsaw_engine.rollout.episodes import EpisodeResult, collect_episodes
from jigsaw_engine.rollout.protocol import RolloutEngine, SamplingParams
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer
from jigsaw_engine.train.token_batch import collate


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
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "n", "max_response_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.adv_estimator == "gae":
            raise ValueError("adv_estimator: 'gae' needs a critic, which this job does not train yet; use grpo or rloo")
        if not 0 <= self.overlong_buffer_tokens <= self.max_response_tokens:
            raise ValueError(
                f"overlong_buffer_tokens: must be in [0, max_response_tokens={self.max_response_tokens}], "
                f"got {self.overlong_buffer_tokens}"
            )
        if self.kl_in_reward_coef > 0 and self.adv_estimator != "reinforce_plus_plus":
            raise ValueError("kl_in_reward_coef: only reinforce_plus_plus takes KL in the reward; use actor.kl_coef")


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


class RLJob:
    def __init__(
        self,
        *,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerFast,
        env: Environment,
        engine: RolloutEngine,
        config: RLJobConfig,
    ) -> None:
        self.tokenizer = tokenizer
        self.env = env
        self.engine = engine
        self.config = config
        actor = config.actor
        if config.kl_in_reward_coef > 0 and actor.kl_coef == 0:
            # The reference model is needed for the reward's KL even without a KL loss.
            self.trainer = PolicyTrainer(model, actor, keep_reference=True)
        else:
            self.trainer = PolicyTrainer(model, actor)
        self.step = 0
        self.cursor = DataCursor()
        self._dataset = env.dataset()
        if not self._dataset:
            raise ValueError(f"env {env.name!r}: the dataset is empty")

    def run_step(self) -> dict[str, float]:
        """One synchronous step; its metrics (verl's names) plus ``training/global_step``."""
        cfg = self.config
        timings: dict[names.TimedStage, float] = {}
        step_started = time.perf_counter()

        started = time.perf_counter()
        tasks = self.cursor.take(self._dataset, cfg.prompts_per_step, cfg.seed)
        sampling = SamplingParams(
            max_tokens=cfg.max_response_tokens, temperature=cfg.temperature, seed=cfg.seed * 7919 + self.step * 104_729
        )
        episodes, rollout_timing = collect_episodes(
            self.engine, self.env, self.tokenizer, tasks, n=cfg.n, sampling=sampling, request_prefix=f"s{self.step}-"
        )
        timings["gen"] = time.perf_counter() - started

        scores = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
        group_ids = torch.tensor([e.group for e in episodes], dtype=torch.long)
        rewards = scores + self._overlong_penalty(episodes)
        counts = count_informative_groups(rewards, group_ids)
        keep = (
            informative_groups(rewards, group_ids)
            if cfg.dynamic_sampling
            else torch.ones_like(scores, dtype=torch.bool)
        )
        kept = [e for e, k in zip(episodes, keep.tolist(), strict=True) if k]
        metrics: dict[str, float] = {
            "training/global_step": float(self.step + 1),
            names.SCORE_MEAN: float(scores.mean()),
            "rollout/tool_s": rollout_timing.tool_s,
            "rollout/groups_informative": float(counts.kept_groups),
            "rollout/groups_dropped": float(counts.dropped_groups if cfg.dynamic_sampling else 0),
        }
        if kept:
            metrics.update(self._train_on(kept, rewards[keep], group_ids[keep], timings))
        timings["step"] = time.perf_counter() - step_started
        total_tokens = sum(len(e.sample.token_ids) for e in episodes)
        metrics.update(names.compute_timing_metrics(timings))
        metrics.update(names.compute_throughput_metrics(total_num_tokens=total_tokens, step_seconds=timings["step"]))
        metrics[names.SCORE_MEAN] = float(scores.mean())
        self.step += 1
        return metrics

    def _train_on(
        self,
        episodes: list[EpisodeResult],
        rewards: torch.Tensor,
        group_ids: torch.Tensor,
        timings: dict[names.TimedStage, float],
    ) -> dict[str, float]:
        cfg = self.config
        batch = collate([e.sample for e in episodes], pad_token_id=int(self.tokenizer.pad_token_id))

        started = time.perf_counter()
        old_logp = self.trainer.old_log_probs(batch)
        timings["old_log_prob"] = time.perf_counter() - started
        started = time.perf_counter()
        ref_logp = self.trainer.ref_log_probs(batch)
        if ref_logp is not None:
            timings["ref"] = time.perf_counter() - started

        started = time.perf_counter()
        kl_penalty = None
        if cfg.kl_in_reward_coef > 0 and ref_logp is not None:
            kl_penalty = cfg.kl_in_reward_coef * estimate_kl(old_logp, ref_logp, estimator="k1")
        advantages = compute_advantages(
            cfg.adv_estimator,
            scores=rewards,
            response_mask=batch.response_mask,
            group_ids=group_ids,
            kl_penalty=kl_penalty,
            normalize_by_std=cfg.norm_adv_by_std,
        )
        timings["adv"] = time.perf_counter() - started

        started = time.perf_counter()
        metrics = self.trainer.update(batch, advantages, old_logp, ref_logp, seed=cfg.seed + self.step)
        self.engine.load_weights(self.trainer.weights())
        timings["update_actor"] = time.perf_counter() - started

        prompt_lengths = torch.tensor([e.sample.model_written.index(True) for e in episodes], dtype=torch.float32)
        metrics.update(
            names.compute_data_metrics(
                scores=rewards,
                advantages=advantages,
                response_mask=batch.response_mask,
                prompt_lengths=prompt_lengths,
                max_response_length=cfg.max_response_tokens,
            )
        )
        return metrics

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
        torch.save({"trainer": self.trainer.state_dict(), "torch_rng": torch.get_rng_state()}, staging / "state.pt")
        meta = {"step": self.step, "cursor": asdict(self.cursor), "seed": self.config.seed, "env": self.env.name}
        (staging / "job.json").write_text(json.dumps(meta, indent=2))
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        latest = root / "latest"
        (root / ".latest.tmp").write_text(final.name)
        (root / ".latest.tmp").replace(latest)
        return final

    def restore_checkpoint(self, root: Path) -> bool:
        """Continue from the latest checkpoint under ``root``; False when there is none."""
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
        torch.set_rng_state(state["torch_rng"])
        self.step = int(meta["step"])
        self.cursor = DataCursor(**meta["cursor"])
        self.engine.load_weights(self.trainer.weights())
        return True

    def _overlong_penalty(self, episodes: list[EpisodeResult]) -> torch.Tensor:
        cfg = self.config
        if cfg.overlong_buffer_tokens == 0:
            return torch.zeros(len(episodes))
        lengths = torch.tensor([e.response_tokens for e in episodes], dtype=torch.float32)
        return overlong_penalty(lengths, max_length=cfg.max_response_tokens, buffer_length=cfg.overlong_buffer_tokens)
