"""``PipelineSpec``: one tenant's RL job as the engine sees it, parsed from a plain mapping.

The mapping is what users submit (YAML or JSON). Names follow verl where one exists
(``data.train_batch_size``, ``rollout.n``, ``algorithm.adv_estimator``); every problem is
reported with its field path, the bad value and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.checkpoints import CheckpointProblem, model_from_checkpoint_dir, model_from_hub
from jigsaw_engine.spec.models import MODEL_CATALOGUE, ModelSpec
from jigsaw_engine.spec.reader import SpecReader
from jigsaw_engine.spec.workloads import WORKLOADS, WorkloadSpec


class Algorithm(StrEnum):
    GRPO = "grpo"
    PPO = "ppo"
    RLOO = "rloo"
    REINFORCE_PP = "reinforce_plus_plus"
    DAPO = "dapo"


class SyncMode(StrEnum):
    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    n: int
    """Responses per prompt (group size); GRPO needs >= 2 for a group baseline."""
    max_response_length: int
    """Hard cap on generated tokens per sequence (all turns)."""
    temperature: float
    val_n: int = 1
    """Replies per validation prompt (verl's ``rollout.val_kwargs.n``): metrics are ``mean@<n>``."""
    val_temperature: float = 0.0
    """Validation sampling temperature (``val_kwargs.temperature``); 0 is greedy, as verl's
    ``do_sample: false``."""


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    num_gpus: int
    """Devices the pipeline asks for: data-parallel workers x tensor-parallel degree."""
    tp: int
    """Tensor-parallel degree of one rollout worker."""
    rollout_gpus: int | None = None
    """Disaggregated layout (StreamRL, AReaL): this many devices only generate and the rest
    only train. None: colocated, every device does both in turn (verl)."""

    @property
    def dp(self) -> int:
        """Rollout workers."""
        return (self.rollout_gpus or self.num_gpus) // self.tp

    @property
    def train_gpus(self) -> int:
        return self.num_gpus - (self.rollout_gpus or 0)


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    name: str
    algorithm: Algorithm
    model: ModelSpec
    workload: WorkloadSpec
    train_batch_size: int
    """Prompts per step (verl's ``data.train_batch_size``)."""
    rollout: RolloutSpec
    resources: ResourceSpec
    total_steps: int
    mode: SyncMode
    staleness: int
    """Async only: how many policy versions a rollout may lag behind training."""
    ppo_epochs: int
    priority: float
    """Weight in weighted completion time; 1.0 is normal."""
    seed: int
    train_files: str | None = None
    """A user's JSONL dataset (``{"prompt", "answer"}`` per line) for real runs, verl's
    ``data.train_files``; None: the workload's own tasks. The simulator reads lengths from the
    workload either way."""
    grader: str = "numeric"
    """The reward that scores replies (verl's reward function): a built-in grader (``numeric``,
    ``exact_match``, ``math``) or any reward the operator installed (``jigsawrl.rewards``)."""
    save_freq: int = 5
    """Checkpoint every this many steps (verl's ``trainer.save_freq``)."""
    start_step: int = 0
    """Steps already trained: a clone of a checkpoint starts after them."""
    val_files: str | None = None
    """A dataset the policy is validated on during a real run (verl's ``data.val_files``),
    graded by :attr:`grader`; None: no validation. Simulated runs draw no validation curves."""
    test_freq: int = -1
    """Validate every this many steps and at the last (verl's ``trainer.test_freq``); -1: only
    before training (:attr:`val_before_train`)."""
    val_before_train: bool = True
    """Validate once before the first step, reported as step 0 (verl's ``trainer.val_before_train``)."""

    @property
    def sequences_per_step(self) -> int:
        return self.train_batch_size * self.rollout.n


_TOP_LEVEL_MAX_GPUS = 4096


def parse_pipeline_spec(data: Mapping[str, Any] | Any, *, path: str = "") -> PipelineSpec:
    """Parse and check a user's mapping; raise :class:`SpecError` listing every problem."""
    errors: list[FieldError] = []
    spec = _read_pipeline(SpecReader(data, path, errors))
    if errors:
        raise SpecError(errors)
    assert spec is not None
    return spec


def validate_pipeline_spec(data: Mapping[str, Any] | Any) -> list[FieldError]:
    """Every problem with ``data``, or an empty list when it would run."""
    try:
        parse_pipeline_spec(data)
    except SpecError as exc:
        return exc.errors
    return []


def _read_pipeline(r: SpecReader) -> PipelineSpec | None:
    name = r.text("name", "pipeline", max_length=120)
    algorithm = Algorithm(r.choice("algorithm", "grpo", [a.value for a in Algorithm]))
    model = _read_model(r)
    workload_name = r.choice("workload", "gsm8k", sorted(WORKLOADS))
    data = r.section("data")
    train_batch_size = data.integer("train_batch_size", 64, minimum=1, maximum=65536)
    train_files = data.text("train_files", "", max_length=1000) or None
    val_files = data.text("val_files", "", max_length=1000) or None
    # Which rewards are installed is the environments' to say: api.validate_spec checks the name.
    grader = data.text("grader", "numeric", max_length=200)
    data.finish()
    rollout = _read_rollout(r.section("rollout"), algorithm)
    resources = _read_resources(r.section("resources"))
    trainer = r.section("trainer")
    total_steps = trainer.integer("total_steps", 20, minimum=1, maximum=1_000_000)
    ppo_epochs = trainer.integer("ppo_epochs", 1, minimum=1, maximum=16)
    save_freq = trainer.integer("save_freq", 5, minimum=1, maximum=1_000_000)
    start_step = trainer.integer("start_step", 0, minimum=0, maximum=1_000_000)
    if start_step >= total_steps:
        trainer.error("start_step", f"must be < total_steps ({total_steps}), got {start_step}")
    test_freq, val_before_train = _read_validation_schedule(trainer, val_files)
    trainer.finish()
    mode = SyncMode(r.choice("mode", "sync", [m.value for m in SyncMode]))
    staleness = r.integer("staleness", 0 if mode is SyncMode.SYNC else 1, minimum=0, maximum=16)
    if mode is SyncMode.SYNC and staleness != 0:
        r.error("staleness", f"must be 0 when mode is 'sync', got {staleness}; set mode: async")
    priority = r.number("priority", 1.0, minimum=0.01, maximum=100.0)
    seed = r.integer("seed", 0, minimum=0, maximum=2**31 - 1)
    r.finish()
    if model is None:
        return None
    return PipelineSpec(
        name=name,
        algorithm=algorithm,
        model=model,
        workload=WORKLOADS[workload_name],
        train_batch_size=train_batch_size,
        rollout=rollout,
        resources=resources,
        total_steps=total_steps,
        mode=mode,
        staleness=staleness,
        ppo_epochs=ppo_epochs,
        priority=priority,
        seed=seed,
        train_files=train_files,
        grader=grader,
        save_freq=save_freq,
        start_step=start_step,
        val_files=val_files,
        test_freq=test_freq,
        val_before_train=val_before_train,
    )


def _read_validation_schedule(trainer: SpecReader, val_files: str | None) -> tuple[int, bool]:
    """verl's ``trainer.test_freq`` (-1: off) and ``trainer.val_before_train``; either asks
    for a validation set, so without ``data.val_files`` it is refused rather than ignored."""
    test_freq = trainer.integer("test_freq", -1, minimum=-1, maximum=1_000_000)
    if test_freq == 0:
        trainer.error("test_freq", "must be >= 1 (validate every this many steps) or -1 (off), got 0")
    val_before_train = trainer.boolean("val_before_train", True)
    if val_files is None:
        for key in ("test_freq", "val_before_train"):
            if key in trainer.data:
                trainer.error(key, "has no validation set to run on; give data.val_files, or leave it out")
    return test_freq, val_before_train


def _read_model(r: SpecReader) -> ModelSpec | None:
    """A catalogue model or tiny preset by name, or a checkpoint: ``{path: DIR}`` or
    ``{hf: ID, revision: REV}`` (read from its ``config.json``, :mod:`~jigsaw_engine.spec.checkpoints`)."""
    if not isinstance(r.data.get("model"), Mapping):
        name = r.choice("model", "qwen2.5-1.5b", sorted(MODEL_CATALOGUE))
        return MODEL_CATALOGUE.get(name)
    m = r.section("model")
    given = [key for key in ("path", "hf") if key in m.data]
    if len(given) != 1:
        for key in ("path", "hf", "revision"):
            m.raw(key, None)
        m.finish()
        m.error("", "give one of {path: DIR} or {hf: ID, revision: REV}" + (", not both" if given else ""))
        return None
    field = given[0]
    where = m.text(field, "", max_length=1000)
    revision = m.text("revision", "main", max_length=200) if field == "hf" else "main"
    m.finish()
    if not where.strip():
        m.error(field, "must name a checkpoint, got an empty string")
        return None
    try:
        return model_from_checkpoint_dir(where) if field == "path" else model_from_hub(where, revision)
    except CheckpointProblem as exc:
        m.error(field, str(exc))
        return None


def _read_rollout(r: SpecReader, algorithm: Algorithm) -> RolloutSpec:
    n = r.integer("n", 4, minimum=1, maximum=1024)
    if algorithm in (Algorithm.GRPO, Algorithm.RLOO, Algorithm.DAPO) and n == 1:
        r.error("n", f"must be >= 2 for {algorithm.value} (it needs a group baseline), got 1")
    max_len = r.integer("max_response_length", 8192, minimum=1, maximum=262_144)
    temperature = r.number("temperature", 1.0, minimum=0.0, maximum=2.0)
    val_n, val_temperature = _read_val_kwargs(r.section("val_kwargs"))
    r.finish()
    return RolloutSpec(
        n=n, max_response_length=max_len, temperature=temperature, val_n=val_n, val_temperature=val_temperature
    )


def _read_val_kwargs(r: SpecReader) -> tuple[int, float]:
    """verl's ``rollout.val_kwargs``: ``n``, ``temperature`` and ``do_sample`` (false: greedy,
    whatever the temperature). Greedy replies are all alike, so ``n`` > 1 needs sampling."""
    n = r.integer("n", 1, minimum=1, maximum=64)
    temperature = r.number("temperature", 0.0, minimum=0.0, maximum=2.0)
    do_sample = r.boolean("do_sample", "temperature" in r.data and temperature > 0)
    r.finish()
    if do_sample and temperature == 0:
        r.error("temperature", "must be > 0 when do_sample is true (0 is greedy); set it, e.g. 0.6")
    if not do_sample and n > 1:
        r.error("n", f"greedy validation (do_sample false) gives {n} identical replies; set do_sample: true")
    return n, temperature if do_sample else 0.0


def _read_resources(r: SpecReader) -> ResourceSpec:
    num_gpus = r.integer("num_gpus", 2, minimum=1, maximum=_TOP_LEVEL_MAX_GPUS)
    tp = r.integer("tp", 1, minimum=1, maximum=64)
    if num_gpus % tp:
        r.error("tp", f"must divide resources.num_gpus ({num_gpus}), got {tp}")
        tp = 1
    rollout_gpus: int | None = None
    if "rollout_gpus" in r.data:
        rollout_gpus = r.integer("rollout_gpus", tp, minimum=tp, maximum=max(tp, num_gpus - 1))
        if rollout_gpus % tp:
            r.error("rollout_gpus", f"must be a multiple of resources.tp ({tp}), got {rollout_gpus}")
            rollout_gpus = None
    r.finish()
    return ResourceSpec(num_gpus=num_gpus, tp=tp, rollout_gpus=rollout_gpus)
