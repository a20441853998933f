"""The control plane's Prometheus metrics, updated where things happen.

Multiprocess: with ``PROMETHEUS_MULTIPROC_DIR`` set in the environment before the process
starts, every process (each web worker, each Celery pool process) writes its samples to files
in that folder and ``/metrics`` sums them, so the folder must be shared by web and worker and
emptied when they all restart (docs/operations.md#metrics). Without it, ``/metrics`` shows the
answering process's own samples (development, tests).

What is read from the database or the engine (jobs by state, queues, devices) is not kept here:
``scrape`` computes it when Prometheus asks, so it is right whichever process answers.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram, values

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


_HOST = socket.gethostname().replace("_", "-")  # file names split on "_"


def process_identity() -> str:
    """Names this process's sample files. The host name too, not the pid alone: containers
    sharing the folder (web, worker) each number their processes from 1."""
    return f"{_HOST}-{os.getpid()}"


def _forget_stale_live_gauges(folder: Path) -> None:
    """Live gauges (open streams) of processes of this host that are gone, or whose pid this
    process now has, would be added to the live ones forever: delete their files."""
    for path in folder.glob(f"gauge_live*_{_HOST}-*.db"):
        pid = path.stem.rsplit("-", 1)[-1]
        if not pid.isdigit():
            continue
        if int(pid) == os.getpid() or not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)


if MULTIPROCESS:
    _forget_stale_live_gauges(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]))
    values.ValueClass = values.MultiProcessValue(process_identifier=process_identity)

# Request latency: most answers take milliseconds; job creation and exports up to seconds.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_REQUEST_SECONDS = Histogram(
    "jigsaw_http_request_duration_seconds",
    "Time from the request reaching Django to its response, by route (URL name) and status.",
    ["route", "method", "status"],
    buckets=_LATENCY_BUCKETS,
)
ADMISSION_PASS_SECONDS = Histogram(
    "jigsaw_admission_pass_seconds",
    "Duration of one admission pass (the Celery task, lock wait included).",
    buckets=_LATENCY_BUCKETS,
)
ADMITTED_JOBS = Counter("jigsaw_admission_admitted_jobs", "Jobs admitted by admission passes.")
EVENT_PUMP_PASS_SECONDS = Histogram(
    "jigsaw_event_pump_pass_seconds",
    "Duration of one engine event pump pass (pull and store).",
    buckets=_LATENCY_BUCKETS,
)
EVENT_PUMP_EVENTS = Counter("jigsaw_event_pump_events", "Engine events the pump stored.")
EVENT_PUMP_FAILURES = Counter("jigsaw_event_pump_failures", "Event pump passes that failed.")
EVENT_PUMP_LAST_SUCCESS = Gauge(
    "jigsaw_event_pump_last_success_timestamp_seconds",
    "When a pump pass last finished; the pump's lag is time() minus this.",
    multiprocess_mode="max",
)
WEBSOCKET_CLIENTS = Gauge(
    "jigsaw_websocket_clients",
    "Event streams open, by stream (job or tenant).",
    ["stream"],
    multiprocess_mode="livesum",
)
WEBSOCKET_DELIVERY_LAG_SECONDS = Histogram(
    "jigsaw_websocket_delivery_lag_seconds",
    "From an event's commit (its created_at) to its live frame being sent to a client.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
CELERY_TASK_FAILURES = Counter(
    "jigsaw_celery_task_failures", "Celery tasks that raised (retries not counted), by task.", ["task"]
)
CELERY_TASK_RETRIES = Counter("jigsaw_celery_task_retries", "Celery task retries, by task.", ["task"])

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str | None) -> str:
    """A bounded label: clients can send any method name."""
    return method if method in _METHODS else "other"
