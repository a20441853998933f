"""Whether a spec can run for real on this machine: light enough (no torch) for the engine's
validation at submit, so a user hears about a non-tiny model at once, with its field."""

from __future__ import annotations

from pathlib import Path

from jigsaw_engine.errors import FieldError
from jigsaw_engine.models.presets import TINY_PRESETS
from jigsaw_engine.spec.models import ModelSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, SyncMode

REAL_WORKLOADS = ("gsm8k", "math", "aime_refine", "search")
"""Workloads with a real environment: arithmetic (gsm8k, math), self-refinement, retrieval QA."""


TP_REFUSAL = (
    "a real rollout worker serves its model whole (tp 1): its engine runs inside the job's process, "
    "where the portable sampling that lets episodes migrate between workers can read every draw; "
    "got tp {tp}; set resources.tp: 1 and ask for more devices (more data-parallel workers) instead"
)
"""Why ``resources.tp`` > 1 is refused for real runs, on every host: vLLM shards a model over
worker processes, and the engine's sampler must run where the engine reads its draws
(:mod:`jigsaw_engine.rollout.vllm_engine`)."""

CHECKPOINT_WEIGHTS = ("*.safetensors", "pytorch_model*.bin")
CHECKPOINT_TOKENIZER = ("tokenizer.json", "tokenizer_config.json")


def checkpoint_problems(model: ModelSpec) -> list[tuple[str, str]]:
    """``(field, message)`` for what a local checkpoint lacks to be trained and served here.
    A hub checkpoint is fetched when the job is built; where the hub is unreachable the build
    says so (its config was read from the cache or the hub already)."""
    source = model.source
    if source is None or source.path is None:
        return []
    folder = Path(source.path)
    problems: list[tuple[str, str]] = []
    if not any(next(folder.glob(pattern), None) for pattern in CHECKPOINT_WEIGHTS):
        problems.append(("model.path", f"{folder} holds no weights (*.safetensors); save them with save_pretrained"))
    missing = [name for name in CHECKPOINT_TOKENIZER if not (folder / name).is_file()]
    if missing:
        problems.append(
            (
                "model.path",
                f"{folder} has no tokenizer ({', '.join(missing)} missing); save the tokenizer beside the model "
                "(tokenizer.save_pretrained), with the chat template the model was tuned on",
            )
        )
    return problems


def check_real_spec(spec: PipelineSpec, *, path: str = "", allow_start_step: bool = False) -> list[FieldError]:
    """What stops ``spec`` from running for real here; empty when it can. ``allow_start_step``:
    the engine itself resuming a job it lost (an engine restart) from the job's own checkpoint;
    a user's spec may not name one."""
    prefix = f"{path}." if path else ""
    errors = []
    if spec.model.is_checkpoint:
        errors += [FieldError(f"{prefix}{field}", message) for field, message in checkpoint_problems(spec.model)]
    elif spec.model.name not in TINY_PRESETS:
        errors.append(
            FieldError(
                f"{prefix}model",
                f"a real run needs a Hugging Face checkpoint ({{path: DIR}} or {{hf: ID, revision: REV}}) "
                f"or a tiny preset ({', '.join(TINY_PRESETS)}); {spec.model.name!r} is a catalogue model "
                "for simulated runs only",
            )
        )
    if spec.workload.name not in REAL_WORKLOADS:
        errors.append(
            FieldError(
                f"{prefix}workload",
                f"no real environment for {spec.workload.name!r}; use one of {', '.join(REAL_WORKLOADS)}",
            )
        )
    if spec.workload.name == "search" and spec.train_files is None and spec.grader != "numeric":
        errors.append(
            FieldError(
                f"{prefix}data.grader",
                f"the search workload judges its own answers, so reward {spec.grader!r} would never run; "
                "leave data.grader out, or give data.train_files for a single-turn dataset",
            )
        )
    if spec.mode is SyncMode.ASYNC and spec.rollout.temperature != 1.0:
        # The decoupled loss weighs each token by pi_prox / pi_behav: the engine's log-probs
        # must be of the distribution the trainer computes, the untempered one.
        errors.append(
            FieldError(
                f"{prefix}rollout.temperature",
                f"an asynchronous real run samples at temperature 1.0, got {spec.rollout.temperature}",
            )
        )
    if spec.resources.tp != 1:
        errors.append(FieldError(f"{prefix}resources.tp", TP_REFUSAL.format(tp=spec.resources.tp)))
    if spec.start_step and not allow_start_step:
        errors.append(
            FieldError(
                f"{prefix}trainer.start_step",
                "a real run starts from its own checkpoints only (pause and resume it); got a start step",
            )
        )
    return errors
