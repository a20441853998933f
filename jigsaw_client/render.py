"""Plain-text views of API answers for the terminal: tables, key/value blocks, progress lines."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from jigsaw_client.models import Job, JobEvent, LogLine, Quota

# The reward figure to show, first found wins (verl's names; the simulator reports none).
REWARD_METRICS = ("critic/rewards/mean", "critic/score/mean", "reward")

SIMULATED_MEANING = "timings and throughput from the cost model; no weights, samples or rewards were produced"
"""What a simulated run is, said wherever one is shown: it looks like a trained one otherwise."""


def short_time(iso: str | None) -> str:
    """``2026-11-02 14:03:07`` in local time, or ``-``."""
    if not iso:
        return "-"
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def progress_text(job: Job) -> str:
    progress = job["progress"]
    return f"{progress['step']}/{progress['total_steps']}"


def status_text(job: Job) -> str:
    if job["status"] == "queued" and job["queue_position"] is not None:
        return f"queued #{job['queue_position']}"
    return job["status"]


def mode_text(job: Job) -> str:
    if job["engine_mode"] == "simulated":
        return f"simulated ({SIMULATED_MEANING})"
    return "real (a model was trained)"


def job_table(jobs: Iterable[Job]) -> str:
    jobs = list(jobs)
    header = ("ID", "NAME", "STATUS", "MODE", "STEP", "GPUS", "CREATED")
    rows = [
        (
            j["id"],
            j["name"],
            status_text(j),
            j["engine_mode"],
            progress_text(j),
            f"{j['num_gpus']} {j['device_type']}".strip(),
            short_time(j["created_at"]),
        )
        for j in jobs
    ]
    if not rows:
        return "no jobs"
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    lines = ("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in (header, *rows))
    table = "\n".join(line.rstrip() for line in lines)
    if any(j["engine_mode"] == "simulated" for j in jobs):
        table += f"\n\nsimulated: {SIMULATED_MEANING}"
    return table


def job_detail(job: Job) -> str:
    status = job["status"] + (f" ({job['status_reason']})" if job["status_reason"] else "")
    fields: list[tuple[str, Any]] = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("status", status),
        ("mode", mode_text(job)),
    ]
    if job["queue_position"] is not None:
        fields.append(("queue position", job["queue_position"]))
    if job["failure_class"]:
        fields.append(("failure class", job["failure_class"]))
    fields += [
        ("progress", f"step {progress_text(job)}"),
        ("gpus", f"{job['num_gpus']} {job['device_type']}" + (" (borrowed)" if job["borrowed"] else "")),
        ("gpu hours", f"{job['gpu_seconds'] / 3600:.3f}"),
        ("priority", job["priority"]),
        ("tags", ", ".join(job["tags"]) or "-"),
        ("created", short_time(job["created_at"])),
        ("started", short_time(job["started_at"])),
        ("finished", short_time(job["finished_at"])),
    ]
    return key_values(fields)


def quota_report(quota: Quota) -> str:
    head = f"tenant {quota['tenant']} on a cluster of {quota['cluster_gpus']} x {quota['device_type']}"
    usage = key_values([(_label(k), _value(v)) for k, v in quota["usage"].items()], indent=2)
    limits = key_values([(_label(k), _value(v)) for k, v in quota["limits"].items()], indent=2)
    return f"{head}\nusage:\n{usage}\nlimits:\n{limits}"


def log_line(line: LogLine) -> str:
    return f"{short_time(line['created_at'])} {line['level'].upper():7s} {line['message']}"


def key_values(fields: Iterable[tuple[str, Any]], *, indent: int = 0) -> str:
    fields = list(fields)
    width = max((len(k) for k, _ in fields), default=0)
    return "\n".join(f"{' ' * indent}{k + ':':{width + 1}s} {v}" for k, v in fields)


def _label(key: str) -> str:
    return key.replace("_", " ")


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


class ProgressView:
    """Folds a job's events into one line (status, step/total, reward) and says when it changed."""

    def __init__(self, job: Job) -> None:
        self.status: str = job["status"]
        self.reason = ""
        self.step = job["progress"]["step"]
        self.total_steps = job["progress"]["total_steps"]
        self.reward: float | None = None
        self._shown = ""

    def update(self, event: JobEvent) -> str | None:
        """The new line to print after ``event``, or None when nothing visible changed."""
        data = event["data"]
        if event["kind"] == "status":
            self.status = str(data.get("status", self.status))
            self.reason = str(data.get("reason", ""))
        elif event["kind"] == "metrics":
            self.step = int(data.get("step", self.step))
            self.total_steps = int(data.get("total_steps", self.total_steps))
            metrics = data.get("metrics") or {}
            self.reward = next((float(metrics[m]) for m in REWARD_METRICS if m in metrics), self.reward)
        line = self.line()
        if line == self._shown:
            return None
        self._shown = line
        return f"[{short_time(event['created_at'])[-8:]}] {line}"

    def line(self) -> str:
        parts = [f"{self.status:<10s}", f"step {self.step}/{self.total_steps}"]
        if self.reward is not None:
            parts.append(f"reward {self.reward:.4g}")
        if self.reason and self.status not in ("running", "succeeded"):
            parts.append(f"({self.reason})")
        return "  ".join(parts)


def size_text(size: int) -> str:
    """``812 B``, ``4.2 MB``, ``13.5 GB`` (powers of 1000, as disks are sold)."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


class TransferMeter:
    """A download's progress on standard error: one line rewritten in place on a terminal (at
    most ten times a second), else a line at each quarter, so a log shows it is moving."""

    def __init__(self, what: str, *, tty: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._what, self._tty, self._clock = what, tty, clock
        self._shown_at = -1.0
        self._quarter = 0
        self._line = ""

    def update(self, received: int, total: int | None) -> None:
        line = f"downloading {self._what}: {size_text(received)}"
        if total:
            line += f" of {size_text(total)} ({100 * received // total}%)"
        if self._tty:
            now = self._clock()
            if now - self._shown_at >= 0.1 or received == total:
                self._shown_at = now
                print(f"\r{line:<{len(self._line)}}", end="", file=sys.stderr, flush=True)
                self._line = line
        elif total and 4 * received // total > self._quarter:
            self._quarter = 4 * received // total
            print(line, file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self._tty and self._line:
            print(file=sys.stderr, flush=True)
