"""A job's estimate (``POST /api/v1/jobs/estimate``): its shape, as the schema's
``JobEstimateOutput`` describes it, and how ``jigsaw jobs submit --estimate`` prints it."""

from __future__ import annotations

from typing import Literal, TypedDict


class EstimateCost(TypedDict):
    amount: float
    currency: str
    gpu_hour_price: float
    price_source: Literal["tenant", "default"]


class EstimateQueue(TypedDict):
    wait_s: float | None
    jobs_ahead: int
    gpus_free: int
    method: str


class EstimateReason(TypedDict):
    code: Literal["quota", "budget"]
    field: str
    message: str


class EstimateIdleCluster(TypedDict):
    step_s: float
    total_s: float
    gpu_hours: float


class EstimateRecord(TypedDict):
    jobs: int
    step_s_error: float
    gpu_hours_error: float | None


class JobEstimate(TypedDict):
    device_type: str
    num_gpus: int
    steps: int
    simulated_steps: int
    step_s: float
    first_step_s: float
    total_s: float
    gpu_hours: float
    tokens_per_step: float
    idle_cluster: EstimateIdleCluster
    cost: EstimateCost
    queue: EstimateQueue
    blocked: bool
    blockers: list[EstimateReason]
    warnings: list[EstimateReason]
    record: EstimateRecord | None


class AccuracyEstimate(TypedDict):
    step_s: float
    gpu_hours: float
    idle_cluster_step_s: float
    idle_cluster_gpu_hours: float


class AccuracyActual(TypedDict):
    step_s: float
    gpu_hours: float
    steps: int
    complete: bool


class AccuracyError(TypedDict):
    step_s: float | None
    idle_cluster_step_s: float | None
    gpu_hours: float | None
    idle_cluster_gpu_hours: float | None


class JobAccuracy(TypedDict):
    """An ended job's estimate beside its run (``GET /api/v1/jobs/<id>/estimate``)."""

    estimate: AccuracyEstimate
    actual: AccuracyActual
    error: AccuracyError


def duration_text(seconds: float) -> str:
    """``7.1 s``, ``2 min 43 s``, ``3 h 05 min``, ``2 d 4 h``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def _reason_line(reason: EstimateReason) -> str:
    where = f" ({reason['field']})" if reason["field"] else ""
    return f"{reason['code']}{where}: {reason['message']}"


def record_text(record: EstimateRecord | None) -> str:
    """How far the tenant's recent estimates landed, in words."""
    if record is None:
        return "none yet (no job of your tenant has finished)"
    text = f"time per step {record['step_s_error']:+.0%}"
    if record["gpu_hours_error"] is not None:
        text += f", GPU-hours {record['gpu_hours_error']:+.0%}"
    return f"{text} (median over your last {record['jobs']} jobs; +: the runs took less than estimated)"


def estimate_text(estimate: JobEstimate) -> str:
    cost, queue = estimate["cost"], estimate["queue"]
    source = "your tenant's price" if cost["price_source"] == "tenant" else "the service's price"
    if queue["wait_s"] is None:
        wait = "never admitted as it is (see blocked)"
    elif queue["wait_s"] == 0:
        wait = f"none ({queue['gpus_free']} GPUs free, {queue['jobs_ahead']} jobs ahead)"
    else:
        wait = f"about {duration_text(queue['wait_s'])} ({queue['jobs_ahead']} jobs ahead)"
    rows = [
        ("per step", f"{duration_text(estimate['step_s'])}"),
        ("total", f"{duration_text(estimate['total_s'])} for {estimate['steps']} steps, from admission"),
        ("idle cluster", f"{duration_text(estimate['idle_cluster']['total_s'])} if idle GPUs are lent to it"),
        ("GPUs", f"{estimate['num_gpus']} {estimate['device_type']}"),
        ("GPU-hours", f"{estimate['gpu_hours']:.2f}"),
        ("cost", f"{cost['amount']:.2f} {cost['currency']} at {cost['gpu_hour_price']:g} per GPU-hour ({source})"),
        ("queue wait", wait),
        ("past error", record_text(estimate["record"])),
        ("blocked", "no" if not estimate["blocked"] else "yes"),
    ]
    width = max(len(k) for k, _ in rows) + 1
    lines = ["estimate (nothing submitted):"]
    lines += [f"  {k + ':':<{width}} {v}" for k, v in rows]
    lines += [f"    {_reason_line(r)}" for r in estimate["blockers"]]
    lines += [f"  warning: {_reason_line(r)}" for r in estimate["warnings"]]
    lines.append(
        f"  (simulated {estimate['simulated_steps']} of {estimate['steps']} steps on its own GPUs; "
        "times are the cluster's seconds)"
    )
    return "\n".join(lines)
