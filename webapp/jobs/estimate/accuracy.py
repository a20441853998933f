"""How far estimates landed from the runs: an ended job's estimate beside what it did, and a
tenant's recent record, shown next to every new estimate.

A job's estimate is made again from its stored spec rather than stored at submit: the forecast
is deterministic for a spec and the engine's configuration, so it is the figure the tenant was
shown unless an operator changed the cluster since. The run's pace is the median of its steps'
``timing_s/step`` after the first (the first carries the startup, as in the forecast), in the
engine's seconds: the cost model's for a simulated job, the wall clock's for a real one. Errors
are (estimate - actual) / actual: negative when the run was slower than estimated.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping
from typing import Any

from webapp import engine_gateway
from webapp.jobs.models import Job, JobMetrics, JobStatus

logger = logging.getLogger(__name__)

RECORD_JOBS = 20
"""A tenant's record: its most recent succeeded jobs that reported step times."""

ENDED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


def _error(estimate: float, actual: float) -> float | None:
    return (estimate - actual) / actual if actual > 0 else None


def _step_times(job: Job) -> list[float]:
    rows = JobMetrics.objects.filter(job=job).order_by("step").values_list("values", flat=True)
    return [float(v["timing_s/step"]) for v in rows if "timing_s/step" in v]


def job_accuracy(*, job: Job) -> dict[str, Any] | None:
    """An ended job's estimate beside its run; None while it runs or if no step finished."""
    if job.status not in ENDED:
        return None
    times = _step_times(job)
    if not times:
        return None
    try:
        forecast: Mapping[str, Any] = engine_gateway.forecast_job(job.spec)
    except Exception:  # a spec the engine no longer takes: nothing to compare
        logger.warning("no forecast for job %s", job.pk, exc_info=True)
        return None
    actual_step_s = statistics.median(times[1:] or times)
    steps = len(times)
    complete = job.status == JobStatus.SUCCEEDED and steps >= int(forecast["steps"])
    estimate_gpu_hours = forecast["device_seconds"] / 3600.0
    actual_gpu_hours = job.gpu_seconds / 3600.0
    idle = forecast["idle_cluster"]
    return {
        "estimate": {
            "step_s": forecast["step_s"],
            "gpu_hours": estimate_gpu_hours,
            "idle_cluster_step_s": idle["step_s"],
            "idle_cluster_gpu_hours": idle["device_seconds"] / 3600.0,
        },
        "actual": {"step_s": actual_step_s, "gpu_hours": actual_gpu_hours, "steps": steps, "complete": complete},
        "error": {
            "step_s": _error(forecast["step_s"], actual_step_s),
            "idle_cluster_step_s": _error(idle["step_s"], actual_step_s),
            # Only a whole run's bill compares with a whole run's estimate.
            "gpu_hours": _error(estimate_gpu_hours, actual_gpu_hours) if complete else None,
            "idle_cluster_gpu_hours": _error(idle["device_seconds"] / 3600.0, actual_gpu_hours) if complete else None,
        },
    }


def tenant_record(*, tenant_id: int) -> dict[str, Any] | None:
    """The median errors over the tenant's recent succeeded jobs; None before its first."""
    recent = Job.objects.filter(tenant_id=tenant_id, status=JobStatus.SUCCEEDED).order_by("-finished_at", "-id")
    step_errors: list[float] = []
    bill_errors: list[float] = []
    for job in recent.only("id", "spec", "status", "gpu_seconds")[:RECORD_JOBS]:
        found = job_accuracy(job=job)
        if found is None:
            continue
        if found["error"]["step_s"] is not None:
            step_errors.append(found["error"]["step_s"])
        if found["error"]["gpu_hours"] is not None:
            bill_errors.append(found["error"]["gpu_hours"])
    if not step_errors:
        return None
    return {
        "jobs": len(step_errors),
        "step_s_error": statistics.median(step_errors),
        "gpu_hours_error": statistics.median(bill_errors) if bill_errors else None,
    }
