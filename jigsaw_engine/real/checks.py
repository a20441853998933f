"""Whether a spec can run for real on this machine: light enough (no torch) for the engine's
validation at submit, so a user hears about a non-tiny model at once, with its field."""

from __future__ import annotations

from jigsaw_engine.errors import FieldError
from jigsaw_engine.models.presets import TINY_PRESETS
from jigsaw_engine.spec.pipeline import PipelineSpec, SyncMode

REAL_WORKLOADS = ("gsm8k", "math", "aime_refine", "search")
"""Workloads with a real environment: arithmetic (gsm8k, math), self-refinement, retrieval QA."""


def check_real_spec(spec: PipelineSpec, *, path: str = "", allow_start_step: bool = False) -> list[FieldError]:
    """What stops ``spec`` from running for real here; empty when it can. ``allow_start_step``:
    the engine itself resuming a job it lost (an engine restart) from the job's own checkpoint;
    a user's spec may not name one."""
    prefix = f"{path}." if path else ""
    errors = []
    if spec.model.name not in TINY_PRESETS:
        errors.append(
            FieldError(
                f"{prefix}model",
                f"a real run on this machine needs a tiny preset ({', '.join(TINY_PRESETS)}), got {spec.model.name!r}",
            )
        )
    if spec.workload.name not in REAL_WORKLOADS:
        errors.append(
            FieldError(
                f"{prefix}workload",
                f"no real environment for {spec.workload.name!r}; use one of {', '.join(REAL_WORKLOADS)}",
            )
        )
    if spec.mode is SyncMode.ASYNC:
        errors.append(FieldError(f"{prefix}mode", "real runs are synchronous for now; set mode: sync"))
    if spec.resources.tp != 1:
        errors.append(FieldError(f"{prefix}resources.tp", f"tiny models run with tp 1, got {spec.resources.tp}"))
    if spec.start_step and not allow_start_step:
        errors.append(
            FieldError(
                f"{prefix}trainer.start_step",
                "a real run starts from its own checkpoints only (pause and resume it); got a start step",
            )
        )
    return errors
