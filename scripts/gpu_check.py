"""A GPU check in one command: the profile sweep, a real GRPO loop with FSDP2, and each phase beside
its forecast, all in one JSON file.

On a GPU host with only PyTorch and transformers installed (no Ray, vLLM or Django, no network, the
project not installed; run from a copy of the repository):

    python3 scripts/gpu_check.py --out "$OUT/gpu_check.json"

Test it on a CPU (gloo, fp32, the sweep's ``--quick`` mode; well under a minute):

    python3 scripts/gpu_check.py --device cpu --out /tmp/gpu_check.json

Three parts, each recorded as ``ok`` or ``failed`` with its error, so that one failing part does not
lose the others; the JSON is rewritten after each part (``"partial": true`` until the end), so a run
killed at its slot's end still leaves what it had:

- ``grpo``: the example Qwen3 checkpoint (:mod:`jigsaw_engine.train.example_checkpoint`) trained with
  the project's own RL code (:class:`~jigsaw_engine.train.rl_job.RLJob`, the arithmetic GRPO
  settings of a real job): rollouts on the torch engine, old and reference log-probs and the update
  on :class:`~jigsaw_engine.train.policy_trainer.PolicyTrainer` sharded with FSDP2 over a
  one-process group this script starts (NCCL and bf16 on CUDA, gloo and fp32 on a CPU), a
  checkpoint saved after ``--save-after`` steps and resumed into a freshly built trainer, whose
  weights and optimizer state must equal the saved ones and which then runs the same steps again.
- ``profile_sweep``: ``scripts/measure_gpu_profile.py`` within what is left of the budget (less a
  reserve), its profile and raw points embedded. The GRPO loop goes first and stops at 40% of the
  budget, so the sweep, which skips what its budget cannot hold, always gets most of it. The
  budget counts from after torch's import (a few seconds more).
- ``forecast``: each phase's measured seconds beside the cost model's forecast of the same work
  (:class:`~jigsaw_engine.cost.cost_model.RooflineCostModel`), with the project's profile of this
  device and with the profile the sweep just measured.

The torch rollout engine builds its batches, masks and sampling tensors on the CPU, so on CUDA the
script moves its model's inputs to the GPU and the logits back at the model's forward (hooks); the
trainer takes its own ``compute`` device where it has one, else the same bridge. The JSON says which
(``grpo.device_handling``); the phases' times include those copies.

Only the standard library, torch, transformers, tokenizers, numpy and pyyaml may be imported here
and by the project modules it uses (``tests/train/test_gpu_check_script.py`` runs it with Ray, vLLM
and Django refused). Exit status: 0 when every part is ok, 1 when one failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import gc
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the project's modules, without installing it
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built here: never wait on a network
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # stderr is for this script's progress

DEFAULT_BUDGET_S = 450.0
GRPO_BUDGET_SHARE = 0.4
"""Of the whole budget, what the GRPO loop may take before it stops (it goes first)."""
FINISH_RESERVE_S = 15.0
"""Kept back from the sweep for the forecast and the file: the sweep gets the rest."""
QUICK_SWEEP_CAP_S = 40.0
"""The CPU sweep (``--quick``) takes a few seconds; it is never given more than this."""
STEP_PHASES = ("rollout", "reward", "old_logprob", "ref_logprob", "update", "weight_sync")
"""Each step's phases in RLJob's order (verl's): generation, scoring, the two log-prob forwards,
the update's optimizer steps, the new weights into the rollout engine."""
CHECKPOINT_PHASES = ("save", "resume")

_STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress on stderr with the seconds spent, so whoever watches the slot sees the clock."""
    print(f"[gpu_check {time.perf_counter() - _STARTED:6.1f} s] {message}", file=sys.stderr, flush=True)


class BudgetSpent(RuntimeError):
    """A part ran out of its share of the budget."""


# --- the GRPO loop ------------------------------------------------------------------------------


class Device:
    """Where the models run, and how the phases are timed there."""

    def __init__(self, kind: str) -> None:
        self.torch = torch.device("cuda", torch.cuda.current_device()) if kind == "cuda" else torch.device("cpu")
        self.cuda = self.torch.type == "cuda"
        self.dtype = torch.bfloat16 if self.cuda and torch.cuda.is_bf16_supported() else torch.float32
        # NCCL for the sharded model's collectives; gloo where a trainer reduces a host tensor.
        self.backend = "cpu:gloo,cuda:nccl" if self.cuda else "gloo"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.torch)

    def timed(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """Seconds of ``fn()`` as the device sees them (queued GPU work finished on both sides)."""
        self.sync()
        started = time.perf_counter()
        out = fn()
        self.sync()
        return time.perf_counter() - started, out

    def bridge(self, model: torch.nn.Module) -> None:
        """Inputs to the device before ``model``'s forward, logits back to the CPU after it: the
        torch engine (and a trainer without a compute device of its own) builds its tensors on
        the CPU (module docstring)."""
        if not self.cuda:
            return
        target = self.torch

        def inputs_to_device(
            _module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
            def move(value: Any) -> Any:
                return value.to(target, non_blocking=True) if isinstance(value, torch.Tensor) else value

            return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}

        def logits_to_host(_module: torch.nn.Module, _args: tuple[Any, ...], output: Any) -> Any:
            output.logits = output.logits.to("cpu")
            return output

        model.register_forward_pre_hook(inputs_to_device, with_kwargs=True, prepend=True)
        model.register_forward_hook(logits_to_host)


@contextlib.contextmanager
def process_group(device: Device) -> Iterator[Any]:
    """A one-process torch.distributed group (no launcher, no Ray) and its device mesh."""
    from jigsaw_engine.train.fsdp import data_parallel_mesh

    if device.cuda:
        torch.cuda.set_device(device.torch)
    store = torch.distributed.HashStore()  # type: ignore[attr-defined]  # in-process: world size 1
    torch.distributed.init_process_group(device.backend, store=store, rank=0, world_size=1)
    try:
        yield data_parallel_mesh(device.torch.type)
    finally:
        torch.distributed.destroy_process_group()


def job_config(args: argparse.Namespace) -> Any:
    """A real arithmetic GRPO job's settings (:func:`jigsaw_engine.real.jobs.build_real_pipeline`)."""
    from jigsaw_engine.real import jobs
    from jigsaw_engine.train.policy_trainer import ActorConfig
    from jigsaw_engine.train.rl_job import RLJobConfig

    rows = args.prompts * args.n
    return RLJobConfig(
        prompts_per_step=args.prompts,
        n=args.n,
        max_response_tokens=args.max_tokens,
        adv_estimator="grpo",
        actor=ActorConfig(
            lr=jobs.TINY_LR,
            micro_batch_size=jobs.TINY_MICRO_BATCH_ROWS,
            micro_batch_tokens=jobs.TINY_MICRO_BATCH_TOKENS,
            micro_batch_overhead_tokens=jobs.TINY_MICRO_BATCH_OVERHEAD_TOKENS,
            ppo_mini_batch_size=-(-rows // jobs.OPTIMIZER_STEPS_PER_UPDATE),
            kl_coef=jobs.KL_LOSS_COEF,
            kl_estimator="k3",
        ),
        seed=args.seed,
    )


def build_job(folder: Path, args: argparse.Namespace, device: Device, mesh: Any) -> Any:
    """The checkpoint as a job: one torch rollout engine on the device, the trainer sharded on ``mesh``."""
    from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
    from jigsaw_engine.models.loading import load_policy
    from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
    from jigsaw_engine.train.example_checkpoint import ExampleCheckpoint
    from jigsaw_engine.train.policy_trainer import PolicyTrainer
    from jigsaw_engine.train.rl_job import RLJob

    shape = ExampleCheckpoint()  # the tasks the checkpoint was warmed up on
    env = MathEnv(generate_arithmetic(args.seed, shape.tasks, max_operand=shape.max_operand))
    policy = load_policy(folder)
    model = policy.model.to(device.dtype)
    engine_model = copy.deepcopy(model).to(device.torch)
    device.bridge(engine_model)
    engine = TorchRolloutEngine(engine_model, pad_token_id=int(policy.tokenizer.pad_token_id))
    config = job_config(args)
    options, handling = trainer_device(device)
    trainer = PolicyTrainer(model, config.actor, mesh=mesh, **options)  # FSDP2 puts the shards on the mesh's device
    if handling == "bridge":
        device.bridge(trainer.model)
        if trainer.reference is not None:
            device.bridge(trainer.reference)
    return RLJob(model=model, tokenizer=policy.tokenizer, env=env, engine=engine, config=config, trainer=trainer)


def trainer_device(device: Device) -> tuple[dict[str, Any], str]:
    """How the trainer reaches the GPU: through its own ``compute`` device where
    :class:`~jigsaw_engine.train.policy_trainer.PolicyTrainer` takes one (the project's GPU path),
    else through :meth:`Device.bridge`. Nothing to do on the CPU."""
    import inspect

    from jigsaw_engine.train.policy_trainer import PolicyTrainer

    if not device.cuda:
        return {}, "cpu"
    if "compute" in inspect.signature(PolicyTrainer).parameters:
        from jigsaw_engine.models.compute import resolve_compute_device  # type: ignore[import-not-found,unused-ignore]

        return {"compute": resolve_compute_device()}, "trainer's compute device"
    return {}, "bridge"


def run_step(job: Any, device: Device) -> dict[str, Any]:
    """One synchronous step, phase by phase as :meth:`RLJob.run_step` runs them, each timed."""
    from jigsaw_engine.rl import metrics as names

    seconds: dict[str, float] = {}
    step = job.next_step

    def rollout() -> None:
        job.begin_step()
        for worker in range(job.step_workers):
            job.rollout(worker)

    seconds["rollout"], _ = device.timed(rollout)
    seconds["reward"], _ = device.timed(job.score)
    seconds["old_logprob"], _ = device.timed(job.old_log_probs)
    seconds["ref_logprob"], _ = device.timed(job.ref_log_probs)
    seconds["update"], _ = device.timed(lambda: job.train(1, 1))
    seconds["weight_sync"], metrics = device.timed(job.sync_weights)
    plans = job.step_plans[step]
    kept = (names.SCORE_MEAN, names.PG_LOSS, names.KL_LOSS, names.ENTROPY, names.GRAD_NORM)
    return {
        "step": step,
        "seconds": {k: round(v, 6) for k, v in seconds.items()},
        "sequences": len(plans),
        "tokens": sum(p.total_tokens for p in plans),
        "response_tokens": sum(p.response_tokens for p in plans),
        "metrics": {k: metrics[k] for k in kept if k in metrics},
    }


def trainer_state(job: Any) -> dict[str, Any]:
    """The trainer's whole state on the CPU (a collective across the group): weights, optimizer."""
    state = job.trainer.state_dict()
    return {
        "model": {k: v.detach().float().cpu().clone() for k, v in state["model"].items()},
        "optimizer": {
            name: {k: (v.detach().float().cpu().clone() if isinstance(v, torch.Tensor) else v) for k, v in s.items()}
            for name, s in state["optimizer"]["state"].items()
        },
    }


def compare_states(saved: dict[str, Any], resumed: dict[str, Any]) -> dict[str, Any]:
    """Largest difference between two :func:`trainer_state` results, and the optimizer steps."""
    weight_diff = max(float((saved["model"][k] - resumed["model"][k]).abs().max()) for k in saved["model"])
    moments = [
        float((s[key] - resumed["optimizer"][name][key]).abs().max())
        for name, s in saved["optimizer"].items()
        for key in ("exp_avg", "exp_avg_sq")
        if key in s
    ]
    steps_saved = sorted({float(s["step"]) for s in saved["optimizer"].values()})
    steps_resumed = sorted({float(s["step"]) for s in resumed["optimizer"].values()})
    return {
        "same_keys": set(saved["model"]) == set(resumed["model"])
        and set(saved["optimizer"]) == set(resumed["optimizer"]),
        "max_weight_diff": weight_diff,
        "max_moment_diff": max(moments, default=0.0),
        "optimizer_steps_saved": steps_saved,
        "optimizer_steps_resumed": steps_resumed,
    }


def grpo_part(
    args: argparse.Namespace, device: Device, deadline: float, result: dict[str, Any], plans: dict[int, list[Any]]
) -> None:
    """The GRPO loop with a checkpoint saved and resumed (module docstring); fills ``result`` as it
    goes, so that what was done is kept when a later phase fails, and ``plans`` with each step's
    sequences in the simulator's terms (what the forecast replays)."""
    from jigsaw_engine.runtime.machine_speed import reference_seconds
    from jigsaw_engine.train.example_checkpoint import build_example_checkpoint

    def check_time(what: str) -> None:
        if time.perf_counter() > deadline:
            raise BudgetSpent(f"the GRPO loop's share of the budget ran out before {what}")

    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    try:
        if not device.cuda:  # the CPU profile's host speed, beside the loop (the forecast scales by it)
            result["reference_s_before"] = reference_seconds(3)
        check_time("the example checkpoint")
        seconds, folder = device.timed(lambda: build_example_checkpoint(work / "tiny-qwen3-arith"))
        result["checkpoint"] = {
            "build_s": round(seconds, 3),
            "config": json.loads((folder / "config.json").read_text()),
        }
        log(f"example checkpoint built in {seconds:.1f} s")
        result.update(
            dtype=str(device.dtype).removeprefix("torch."),
            backend=device.backend,
            world_size=1,
            device_handling={
                "rollout_engine": "bridge",
                "trainer": trainer_device(device)[1],
                "bridge": "inputs to the device and logits back to the CPU at the model's forward",
            }
            if device.cuda
            else None,
            config={"prompts": args.prompts, "n": args.n, "max_tokens": args.max_tokens, "seed": args.seed},
            steps=[],
        )
        with process_group(device) as mesh:
            job = build_job(folder, args, device, mesh)
            result["parameters"] = sum(p.numel() for p in job.trainer.model.parameters())
            result["fsdp"] = type(job.trainer.model).__name__
            saved: dict[str, Any] = {}
            checkpoints = work / "checkpoints"
            for _ in range(args.steps):
                check_time(f"step {job.next_step}")
                record = run_step(job, device)
                result["steps"].append(record)
                plans[record["step"]] = job.step_plans[record["step"]]
                log(f"step {record['step']}: " + ", ".join(f"{k} {v:.3f} s" for k, v in record["seconds"].items()))
                if job.step == args.save_after:
                    save_s, _ = device.timed(lambda: job.save_checkpoint(checkpoints))
                    saved = trainer_state(job)
                    result["save"] = {"after_steps": job.step, "seconds": round(save_s, 6)}
                    log(f"checkpoint saved after {job.step} steps in {save_s:.3f} s")
            check_time("the resume")
            build_s, resumed = device.timed(lambda: build_job(folder, args, device, mesh))
            resume_s, found = device.timed(lambda: resumed.restore_checkpoint(checkpoints, step=args.save_after))
            comparison = compare_states(saved, trainer_state(resumed)) | {"found": found, "step": resumed.step}
            result["resume"] = {"build_s": round(build_s, 6), "seconds": round(resume_s, 6), **comparison}
            log(
                f"resumed at step {resumed.step} in {resume_s:.3f} s (a fresh trainer built in {build_s:.2f} s): "
                f"largest weight difference {comparison['max_weight_diff']:.3g}"
            )
            if not (found and comparison["same_keys"] and resumed.step == args.save_after):
                raise RuntimeError(f"the checkpoint did not resume at step {args.save_after}: {comparison}")
            if comparison["max_weight_diff"] != 0.0 or comparison["max_moment_diff"] != 0.0:
                raise RuntimeError(f"the resumed trainer's state differs from the saved one: {comparison}")
            if comparison["optimizer_steps_saved"] != comparison["optimizer_steps_resumed"]:
                raise RuntimeError(f"the resumed optimizer is at another step: {comparison}")
            continued = []
            while resumed.step < args.steps:
                check_time(f"resumed step {resumed.next_step}")
                continued.append(run_step(resumed, device))
            result["resumed_steps"] = continued
            result["continuation"] = continuation(result["steps"], continued, job, resumed)
            log(f"resumed job ran steps {[r['step'] for r in continued]}: {result['continuation']}")
        if not device.cuda:
            result["reference_s_after"] = reference_seconds(3)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def continuation(original: list[dict[str, Any]], resumed: list[dict[str, Any]], job: Any, other: Any) -> dict[str, Any]:
    """How the resumed job's steps compare with the same steps of the job that never stopped."""
    by_step = {r["step"]: r for r in original}
    metric_diff = max(
        (abs(r["metrics"][k] - by_step[r["step"]]["metrics"][k]) for r in resumed for k in r["metrics"]),
        default=0.0,
    )
    same_rollouts = all(
        (r["tokens"], r["response_tokens"]) == (by_step[r["step"]]["tokens"], by_step[r["step"]]["response_tokens"])
        for r in resumed
    )
    mine, theirs = job.trainer.weights(), other.trainer.weights()
    weight_diff = max(float((mine[k].float() - theirs[k].float()).abs().max()) for k in mine)
    return {
        "steps": [r["step"] for r in resumed],
        "same_rollout_lengths": same_rollouts,
        "max_metric_diff": metric_diff,
        "final_max_weight_diff": weight_diff,
        "identical": same_rollouts and metric_diff == 0.0 and weight_diff == 0.0,
    }


# --- the profile sweep --------------------------------------------------------------------------


def load_profile_script() -> ModuleType:
    """``scripts/measure_gpu_profile.py`` as a module (it is one file, to be copied alone)."""
    name = "measure_gpu_profile"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def sweep_part(device: Device, budget_s: float, result: dict[str, Any]) -> None:
    """The profile sweep within ``budget_s``; its profile and points go into ``result``."""
    script = load_profile_script()
    slug = script.slug_device(script.device_name(device.torch), device.torch)
    with tempfile.TemporaryDirectory(prefix="gpu-check-sweep-") as folder:
        out = Path(folder) / f"{slug}.json"
        argv = ["--device", device.torch.type, "--out", str(out), "--budget-s", f"{budget_s:.0f}"]
        if not device.cuda:
            argv.append("--quick")
        result.update(argv=argv, budget_s=round(budget_s, 1))
        log(f"profile sweep: measure_gpu_profile.py {' '.join(argv)}")
        with contextlib.redirect_stdout(sys.stderr):  # its tables are progress here; the JSON is the result
            status = script.main(argv)
        if status:
            raise RuntimeError(f"measure_gpu_profile.py exited with {status}")
        result["profile"] = json.loads(out.read_text())
        result["points"] = json.loads(Path(f"{out}.points.json").read_text())


# --- the forecast -------------------------------------------------------------------------------


def profile_from_dict(raw: dict[str, Any]) -> Any:
    """A :class:`~jigsaw_engine.cost.device.DeviceProfile` from a profile file's contents."""
    from dataclasses import fields

    from jigsaw_engine.cost.device import DeviceProfile

    names = {f.name for f in fields(DeviceProfile)}
    values = {k: v for k, v in raw.items() if k in names}
    values["parallel_fraction_by_params"] = tuple(
        (float(size), float(f)) for size, f in sorted(values.get("parallel_fraction_by_params") or [])
    )
    return DeviceProfile(**values)


def forecast_seconds(profile: Any, grpo: dict[str, Any], counted: list[dict[str, Any]]) -> dict[str, float]:
    """The cost model's seconds for each phase of the loop, per step for a step's phases (the mean
    over ``counted``), once for the save and the resume.

    Each phase is charged directly with the term the simulator's step graph charges it with
    (:func:`jigsaw_engine.graph.builder.build_step_graph`), without the per-stage launch overhead,
    since the phases run in this process: the rollout by :func:`~jigsaw_engine.workload.decode_sim.simulate_worker`
    over the step's own sequences (one worker, no prefix cache: the torch engine), the reward per
    sequence, the forwards and the update by the tokens and squared lengths of the batch, the
    weight sync by :meth:`~jigsaw_engine.cost.cost_model.RooflineCostModel.weight_sync_s`. The cost
    model has no checkpoint term: the resume is charged as a parked job's training state brought
    back (``context_switch_s``), the save as the same bytes taken off without the wake-up.
    """
    from jigsaw_engine.cost.cost_model import WAKE_S, RooflineCostModel
    from jigsaw_engine.spec.models import model_from_hf_config
    from jigsaw_engine.workload.decode_sim import simulate_worker
    from jigsaw_engine.workload.plans import SequencePlan

    cost = RooflineCostModel(profile)
    model = model_from_hf_config("example-checkpoint", grpo["checkpoint"]["config"])
    totals = dict.fromkeys(STEP_PHASES, 0.0)
    for record in counted:
        plans: list[SequencePlan] = record["plans"]
        tokens = float(sum(p.total_tokens for p in plans))
        square = float(sum(p.total_tokens**2 for p in plans))
        forward = cost.logprob_forward_s(model, tokens=tokens, num_gpus=1, square_tokens=square)
        totals["rollout"] += simulate_worker(cost, model, plans, prefix_cache=False).duration_s
        totals["reward"] += profile.reward_s_per_sequence * len(plans)
        totals["old_logprob"] += forward
        totals["ref_logprob"] += forward
        totals["update"] += cost.train_s(model, tokens=tokens, num_gpus=1, square_tokens=square)
        totals["weight_sync"] += cost.weight_sync_s(model)
    per_step = {k: v / max(1, len(counted)) for k, v in totals.items()}
    resume = cost.context_switch_s(model, num_gpus=1, training=True)
    return per_step | {"save": resume - WAKE_S, "resume": resume}


def forecast_part(
    device: Device, grpo: dict[str, Any], sweep: dict[str, Any], plans: dict[int, list[Any]], result: dict[str, Any]
) -> None:
    """Measured seconds per phase beside the forecasts (see :func:`forecast_seconds`)."""
    from jigsaw_engine.cost.device import load_device_profile, slowed_down
    from jigsaw_engine.runtime.machine_speed import slowdown_range

    steps = grpo.get("steps", [])
    counted = [r | {"plans": plans[r["step"]]} for r in steps[1:]] or [r | {"plans": plans[r["step"]]} for r in steps]
    if not counted:
        raise RuntimeError("the GRPO loop ran no step: nothing to compare")
    measured = {p: sum(r["seconds"][p] for r in counted) / len(counted) for p in STEP_PHASES}
    if "save" in grpo:
        measured["save"] = grpo["save"]["seconds"]
    if "resume" in grpo:
        measured["resume"] = grpo["resume"]["seconds"]
    script = load_profile_script()
    name = script.slug_device(script.device_name(device.torch), device.torch) if device.cuda else "cpu"
    profiles: dict[str, Any] = {}
    try:
        profiles["project"] = load_device_profile(name)
    except KeyError as exc:
        result["project_profile_error"] = str(exc)
    if device.cuda is False and "reference_s_before" in grpo and profiles.get("project") is not None:
        reference = profiles["project"].reference_s
        low, high = slowdown_range(grpo["reference_s_before"], grpo.get("reference_s_after", 0.0), reference)
        if reference and high > 0:
            result["host_slowdown"] = [round(low, 3), round(high, 3)]
            profiles["project"] = slowed_down(profiles["project"], (low + high) / 2)
    if sweep.get("profile"):
        profiles["swept"] = profile_from_dict(sweep["profile"])
    forecasts = {label: forecast_seconds(p, grpo, counted) for label, p in profiles.items()}
    result.update(
        project_profile=name if "project" in profiles else None,
        swept_profile=sweep["profile"]["name"] if "swept" in profiles else None,
        counted_steps=[r["step"] for r in counted],
        rule="step phases: mean seconds per counted step (the first step, a warm-up, left out where there are "
        "more); save and resume: the one of each",
    )
    rows = []
    for phase in (*STEP_PHASES, *CHECKPOINT_PHASES):
        if phase not in measured:
            continue
        row: dict[str, Any] = {"phase": phase, "measured_s": round(measured[phase], 6)}
        for label, by_phase in forecasts.items():
            key = "forecast_s" if label == "project" else "forecast_swept_s"
            ratio = "ratio" if label == "project" else "ratio_swept"
            row[key] = float(f"{by_phase[phase]:.4g}")
            row[ratio] = round(measured[phase] / by_phase[phase], 3) if by_phase[phase] > 0 else None
        rows.append(row)
    result["phases"] = rows
    for row in rows:
        project = f"{row['forecast_s']:9.4g} s (x{row['ratio']})" if "forecast_s" in row else "-"
        swept = (
            f", swept profile {row['forecast_swept_s']:.4g} s (x{row['ratio_swept']})" if "ratio_swept" in row else ""
        )
        log(f"{row['phase']:12s} measured {row['measured_s']:9.4f} s, forecast {project}{swept}")


# --- the report ---------------------------------------------------------------------------------


def host_info(device: Device) -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {
        "device_name": load_profile_script().device_name(device.torch),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    if device.cuda:
        props = torch.cuda.get_device_properties(device.torch)
        nccl = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
        info |= {
            "gpu_memory_bytes": props.total_memory,
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
            "cudnn": torch.backends.cudnn.version(),  # type: ignore[no-untyped-call]
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
        }
    return info


class Report:
    """The one JSON file, rewritten whole (through a rename) after every part."""

    def __init__(self, out: Path, data: dict[str, Any]) -> None:
        self.out, self.data = out, data

    def write(self, *, partial: bool) -> None:
        self.data["partial"] = partial
        self.data["wall_s"] = round(time.perf_counter() - _STARTED, 2)
        staging = self.out.with_name(f".{self.out.name}.tmp")
        staging.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        staging.replace(self.out)

    def part(self, name: str, fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Run one part into its own result; a failure is recorded with its error, not raised."""
        result: dict[str, Any] = {}
        self.data[name] = result
        started = time.perf_counter()
        log(f"{name}: start")
        try:
            fn(result)
            status: dict[str, Any] = {"status": "ok"}
        except (Exception, SystemExit) as exc:  # one failing part must not lose the others
            text = f"{type(exc).__name__}: {exc}"
            status = {"status": "failed", "error": text, "traceback": traceback.format_exc()[-4000:]}
            log(f"{name} failed: {text}")
        status["seconds"] = round(time.perf_counter() - started, 2)
        self.data["parts"][name] = status
        log(f"{name}: {status['status']} in {status['seconds']:.1f} s")
        self.write(partial=True)
        return result


# --- arguments and the run ----------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="default cuda")
    parser.add_argument(
        "--budget-s", type=float, default=DEFAULT_BUDGET_S, help=f"wall-clock cap (default {DEFAULT_BUDGET_S:.0f})"
    )
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps (default 4; at least 2)")
    parser.add_argument("--save-after", type=int, help="steps before the checkpoint (default half of --steps)")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per step (default 32)")
    parser.add_argument("--n", type=int, default=8, help="replies per prompt (default 8)")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens per reply at most (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-sweep", action="store_true", help="leave the profile sweep out")
    args = parser.parse_args(argv)
    if args.save_after is None:
        args.save_after = args.steps // 2
    problems = []
    if args.budget_s <= 0:
        problems.append(f"--budget-s: must be > 0, got {args.budget_s:g}")
    if args.steps < 2:
        problems.append(f"--steps: must be at least 2 (a step before the checkpoint and one after), got {args.steps}")
    elif not 1 <= args.save_after < args.steps:
        problems.append(
            f"--save-after: must be 1..{args.steps - 1} (steps before the checkpoint), got {args.save_after}"
        )
    for name in ("prompts", "n", "max_tokens"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')}: must be at least 1, got {getattr(args, name)}")
    if args.out.is_dir():
        problems.append(f"--out: {args.out} is a directory; name the JSON file to write")
    if args.device == "cuda" and not torch.cuda.is_available():
        problems.append("--device cuda: torch sees no CUDA device here (run on a GPU host, or test with --device cpu)")
    if problems:
        parser.error("; ".join(problems))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    budget_end = _STARTED + args.budget_s
    device = Device(args.device)
    if not device.cuda:  # as the CPU profile was measured: one core, one torch thread
        torch.set_num_threads(1)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = Report(
        args.out,
        {
            "tool": "scripts/gpu_check.py",
            "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "device": args.device,
            "budget_s": args.budget_s,
            "host": host_info(device),
            "parts": {},
        },
    )
    report.write(partial=True)
    log(f"{report.data['host']['device_name']}: torch {torch.__version__}, budget {args.budget_s:.0f} s")

    grpo_deadline = _STARTED + GRPO_BUDGET_SHARE * args.budget_s
    plans: dict[int, list[Any]] = {}
    grpo_result = report.part("grpo", lambda result: grpo_part(args, device, grpo_deadline, result, plans))
    gc.collect()  # the loop's models and optimizers, before the sweep sizes its KV cache to free memory
    if device.cuda:
        torch.cuda.empty_cache()
    sweep_result: dict[str, Any] = {}
    if args.skip_sweep:
        report.data["parts"]["profile_sweep"] = {"status": "skipped", "seconds": 0.0}
    else:
        left = budget_end - time.perf_counter() - FINISH_RESERVE_S
        sweep_budget = min(left, QUICK_SWEEP_CAP_S) if not device.cuda else left

        def sweep(result: dict[str, Any]) -> None:
            if sweep_budget < 5:
                raise BudgetSpent(f"{max(0.0, sweep_budget):.0f} s of the budget left for the sweep (5 at least)")
            sweep_part(device, sweep_budget, result)

        sweep_result = report.part("profile_sweep", sweep)
    report.part("forecast", lambda result: forecast_part(device, grpo_result, sweep_result, plans, result))
    report.write(partial=False)
    failed = [name for name, part in report.data["parts"].items() if part["status"] == "failed"]
    log(f"wrote {args.out} after {report.data['wall_s']:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
