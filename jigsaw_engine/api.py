"""The engine's public face: the only module (with ``contracts``) the control plane imports.

Validation, presets and engine hosts. Heavy runtimes (Ray) are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jigsaw_engine.contracts import EngineHost
from jigsaw_engine.control.admission_policy import (
    AdmissionEffects,
    AdmissionOutcome,
    HeldJob,
    QueuedJob,
    TenantLimits,
    TenantUsage,
    decide_admission,
)
from jigsaw_engine.control.admission_replay import AdmissionWait, ForecastJob, admission_wait
from jigsaw_engine.envs.dataset_check import DatasetCheck, DatasetRow, check_dataset_text
from jigsaw_engine.errors import FieldError, JigsawError, SpecError
from jigsaw_engine.failpoints import failpoint
from jigsaw_engine.hosts.local import EngineConfig, EngineMode, start_local_engine
from jigsaw_engine.real.job_checkpoints import (
    CheckpointNotExported,
    CheckpointStepMissing,
    RemovedCheckpoints,
    checkpoint_model_files,
    remove_job_checkpoints,
)
from jigsaw_engine.spec.cluster import ClusterSpec, check_fits_cluster
from jigsaw_engine.spec.models import ModelSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.spec.presets import PRESETS, REAL_PRESETS, checkpoint_presets

__all__ = [
    "AdmissionEffects",
    "AdmissionOutcome",
    "AdmissionWait",
    "CheckpointNotExported",
    "CheckpointStepMissing",
    "DatasetCheck",
    "DatasetRow",
    "EngineConfig",
    "FieldError",
    "ForecastJob",
    "HeldJob",
    "JigsawError",
    "QueuedJob",
    "RemovedCheckpoints",
    "SpecError",
    "TenantLimits",
    "TenantUsage",
    "admission_wait",
    "check_dataset_text",
    "checkpoint_model_files",
    "connect_ray_engine",
    "decide_admission",
    "failpoint",
    "forecast_job",
    "list_models",
    "list_presets",
    "list_rewards",
    "remove_job_checkpoints",
    "resolve_spec",
    "start_local_engine",
    "validate_spec",
]


def validate_spec(
    spec: Mapping[str, Any] | Any,
    cluster: ClusterSpec | None = None,
    *,
    mode: EngineMode = "simulated",
    model_roots: Sequence[str] | None = None,
) -> list[FieldError]:
    """Every problem with a user's pipeline spec, paths relative to the spec; [] if it runs.
    ``model_roots``: the folders a checkpoint's ``model.path`` may be in (None: anywhere). A
    path elsewhere is refused before anything under it is read: a tenant names only models
    the service was given, never any folder of the server."""
    outside = _outside_model_roots(spec, model_roots)
    if outside:
        return outside
    try:
        parsed = parse_pipeline_spec(spec)
    except SpecError as exc:
        unknown = _unknown_reward(spec)
        return [e for e in exc.errors if not unknown or e.field != "data.grader"] + unknown
    errors = _unknown_reward(spec) + (check_fits_cluster(parsed, cluster) if cluster is not None else [])
    if mode == "real":
        from jigsaw_engine.real.checks import check_real_spec

        errors += check_real_spec(parsed)
    return errors


def _unknown_reward(spec: Any) -> list[FieldError]:
    """``data.grader`` naming no installed reward (``jigsawrl.rewards``), with the list: tenants
    choose among what the operator installed, and a spec never carries code."""
    from jigsaw_engine.envs.reward_registry import reward_names, unknown_reward_message

    data = spec.get("data") if isinstance(spec, Mapping) else None
    name = data.get("grader") if isinstance(data, Mapping) else None
    if name is None or (isinstance(name, str) and name in reward_names()):
        return []
    return [FieldError("data.grader", unknown_reward_message(name))]


def _outside_model_roots(spec: Any, model_roots: Sequence[str] | None) -> list[FieldError]:
    model = spec.get("model") if isinstance(spec, Mapping) else None
    where = model.get("path") if isinstance(model, Mapping) else None
    if model_roots is None or not isinstance(where, str):
        return []
    resolved = Path(where).expanduser().resolve()
    if any(resolved.is_relative_to(Path(root).expanduser().resolve()) for root in model_roots):
        return []
    roots = ", ".join(model_roots) or "none are configured"
    return [
        FieldError(
            "model.path",
            f"{where} is not in a folder this service serves models from ({roots}); "
            "put the checkpoint there or ask an admin to add its folder to ENGINE_MODEL_ROOTS",
        )
    ]


def _model_field(model: ModelSpec) -> str | dict[str, str]:
    """How a spec names ``model``: a catalogue name, or where its checkpoint is."""
    source = model.source
    if source is None:
        return model.name
    if source.hub_id is not None:
        return {"hf": source.hub_id, "revision": source.revision or "main"}
    return {"path": str(source.path)}


def resolve_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with every default filled in, as stored beside what the user submitted."""
    p = parse_pipeline_spec(spec)
    return {
        "name": p.name,
        "algorithm": p.algorithm.value,
        "model": _model_field(p.model),
        "workload": p.workload.name,
        "data": {
            "train_batch_size": p.train_batch_size,
            **({"train_files": p.train_files} if p.train_files else {}),
            **({"val_files": p.val_files} if p.val_files else {}),
            **({"grader": p.grader} if p.train_files or p.val_files or p.grader != "numeric" else {}),
        },
        "rollout": {
            "n": p.rollout.n,
            "max_response_length": p.rollout.max_response_length,
            "temperature": p.rollout.temperature,
            **({"val_kwargs": _val_kwargs(p)} if p.val_files else {}),
        },
        "resources": {
            "num_gpus": p.resources.num_gpus,
            "tp": p.resources.tp,
            **({"rollout_gpus": p.resources.rollout_gpus} if p.resources.rollout_gpus else {}),
        },
        "trainer": {
            "total_steps": p.total_steps,
            "ppo_epochs": p.ppo_epochs,
            "save_freq": p.save_freq,
            **({"start_step": p.start_step} if p.start_step else {}),
            **({"test_freq": p.test_freq, "val_before_train": p.val_before_train} if p.val_files else {}),
        },
        "mode": p.mode.value,
        "staleness": p.staleness,
        "priority": p.priority,
        "seed": p.seed,
    }


def _val_kwargs(p: PipelineSpec) -> dict[str, Any]:
    sampled = p.rollout.val_temperature > 0
    return {"n": p.rollout.val_n, "temperature": p.rollout.val_temperature, "do_sample": sampled}


def list_presets(*, mode: EngineMode = "simulated", model_roots: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The submit form's ready-made specs: full-size models, or in real mode tiny ones and one
    for each checkpoint in ``model_roots``."""
    chosen = [*REAL_PRESETS, *checkpoint_presets(model_roots)] if mode == "real" else PRESETS
    return [{"name": p.name, "title": p.title, "spec": dict(p.spec)} for p in chosen]


def list_models(*, mode: EngineMode = "simulated", model_roots: Sequence[str] = ()) -> list[dict[str, Any]]:
    """What a spec may name as its ``model`` in this mode (``spec/model_list.py``), each with
    the value to put in the spec and the presets that use it."""
    from jigsaw_engine.spec.model_list import list_models as models_here

    real = mode == "real"
    presets = [*REAL_PRESETS, *checkpoint_presets(model_roots)] if real else list(PRESETS)
    return models_here(real=real, model_roots=model_roots, presets=presets)


def forecast_job(spec: Mapping[str, Any], cluster: ClusterSpec, *, mode: EngineMode = "simulated") -> dict[str, Any]:
    """What a valid ``spec`` will take on ``cluster`` before it is submitted, in plain numbers:
    the simulator's forecast on its own GPUs (a busy cluster), and under ``idle_cluster`` alone
    on the whole cluster (the best case; see ``control/job_forecast.py``)."""
    from jigsaw_engine.control.job_forecast import forecast_job as simulate_forecast
    from jigsaw_engine.control.job_forecast import own_partition

    parsed = parse_pipeline_spec(spec)
    real = mode == "real"
    busy = simulate_forecast(parsed, own_partition(cluster, parsed.resources.num_gpus), real=real)
    idle = simulate_forecast(parsed, cluster, real=real)
    return {
        "device_type": busy.device_type,
        "num_gpus": busy.num_gpus,
        "steps": busy.steps,
        "simulated_steps": busy.simulated_steps,
        "first_step_s": busy.first_step_s,
        "step_s": busy.step_s,
        "total_s": busy.total_s,
        "device_seconds": busy.device_seconds,
        "tokens_per_step": busy.tokens_per_step,
        "idle_cluster": {"step_s": idle.step_s, "total_s": idle.total_s, "device_seconds": idle.device_seconds},
    }


def connect_ray_engine(config: EngineConfig, *, address: str | None) -> EngineHost:
    """Join (or start) the detached engine actor on the Ray cluster at ``address``."""
    from jigsaw_engine.hosts.engine_actor import RayEngineClient

    return RayEngineClient(config, address=address)


# -- a user's JSONL dataset ({"prompt", "answer"} per line): checked and graded, torch-free ----


def grader_names() -> list[str]:
    """The rewards a spec's ``data.grader`` may name: the built-in graders and the installed ones."""
    from jigsaw_engine.envs.reward_registry import reward_names

    return reward_names()


def list_rewards() -> list[dict[str, Any]]:
    """Every reward installed here (``jigsawrl.rewards`` entry points), the built-in graders
    first: what a spec's ``data.grader`` may name, what each suits and its time limit."""
    from jigsaw_engine.envs.reward_registry import installed_rewards

    return [
        {
            "name": r.name,
            "description": r.description,
            "suits": r.suits,
            "time_limit_s": r.time_limit_s,
            "builtin": r.builtin,
            "source": r.source,
        }
        for r in installed_rewards().values()
    ]


def grade(grader: str, completion: str, answer: str) -> float:
    """The reward ``grader`` gives ``completion`` for reference ``answer`` (1.0 or 0.0), as in training."""
    return grade_reply(grader, completion, answer)[0]


def grade_reply(grader: str, completion: str, answer: str) -> tuple[float, str]:
    """The reward ``grader`` gives ``completion`` for reference ``answer``, as in training, and
    why an installed reward failed on it (it then scores 0); empty when it scored."""
    from jigsaw_engine.envs.graders import get_grader

    try:
        grade_fn = get_grader(grader)
    except ValueError as exc:
        raise SpecError([FieldError("grader", str(exc))]) from exc
    from jigsaw_engine.envs.reward import FAILED_SCORE, RewardError

    try:
        return grade_fn(completion, answer.strip()), ""
    except RewardError as exc:
        return FAILED_SCORE, str(exc)


def grader_answer_problem(grader: str, answer: str) -> str | None:
    """Why ``answer`` could never earn a reward under ``grader``, or None when it can."""
    from jigsaw_engine.envs.graders import check_reference, parse_grader_name

    try:
        grader_name = parse_grader_name(grader)
    except ValueError as exc:
        raise SpecError([FieldError("grader", str(exc))]) from exc
    return check_reference(grader_name, answer.strip())
