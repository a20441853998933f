"""The benchmark's options, constants and the environment of every process of its stack."""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from devstack.launcher import ROOT

BENCH_DB = "jigsaw_bench"
PREFIX = "jigsaw-bench"  # Redis keys, channel-layer prefix, cache prefix and Celery queue
RESULT_MARK = "BENCH-RESULT "
BENCH_ROLE_PASSWORD = uuid.uuid4().hex  # a fresh role each run; works with trust and password auth
PHASES = ("create", "list", "ws")
TARGET_MS = {"create": 50.0, "list": 50.0, "list_queued": 50.0, "ws": 250.0}
WINDOW_S = 5.0
WARMUP_S = 10.0  # fresh workers import lazily and fill their pools: 3 s left that in the p99
WS_CLIENTS_PER_JOB = 10
WS_CONNECTS_AT_ONCE = 50
PUBLISHER_START_S = 5.0  # the publisher's process imports Django first: its first event is due after that
WS_DRAIN_S = 12.0  # longer than the consumers' audit period (10 s), which resends lost events
WS_PATH = "/ws/v1/jobs/{job_id}"
KEEP_ALIVE_S = 65  # the server's idle keep-alive, as the image sets it (docker/Dockerfile)
SENT_AT = "bench/sent_at"
# The soak (--soak): its own database and prefix, so that it never drops a benchmark's.
SOAK_DB = "jigsaw_soak"
SOAK_PREFIX = "jigsaw-soak"
SOAK_WINDOW_S = 30.0
SOAK_CREATE_RATE = 0.2  # per client: 50 clients submit 10 jobs/s in all
SOAK_RSS_TOLERANCE_MIB_PER_MIN = 1.0
SOAK_SAMPLE_S = 2.0
SOAK_NODES = 32  # 256 simulated GPUs: room for every job submitted at the default rate
SOAK_ENGINE_SPEED = 20.0  # engine seconds per wall second: the service's default (ENGINE_SPEED)

# The values of tests.engine.builders.make_spec(): small and valid on the default cluster.
BENCH_SPEC: dict[str, Any] = {
    "name": "bench",
    "algorithm": "grpo",
    "model": "qwen2.5-1.5b",
    "workload": "gsm8k",
    "data": {"train_batch_size": 16},
    "rollout": {"n": 4, "max_response_length": 1024},
    "resources": {"num_gpus": 2},
    "trainer": {"total_steps": 3},
}
# Room for every job the create phase submits; nothing else about the quota is exercised.
BENCH_QUOTA: dict[str, Any] = {
    "max_queued_jobs": 10_000_000,
    "max_running_jobs": 1000,
    "borrow_limit_gpus": 1000,
    "monthly_gpu_hours": 1e9,
}
OTHER_TENANTS = 4
# Jobs in the list phase's table: most finished, many waiting, some running.
STATUS_MIX: dict[str, float] = {
    "queued": 0.30,
    "running": 0.12,
    "paused": 0.03,
    "succeeded": 0.40,
    "failed": 0.08,
    "cancelled": 0.07,
}
FINISHED = ("succeeded", "failed", "cancelled")


class BenchError(RuntimeError):
    pass


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    duration: float
    warmup: float
    workers: int
    clients: int
    ws_clients: int
    jobs_in_table: int
    rate: float
    only: tuple[str, ...]
    json_path: Path | None
    keep_db: bool
    pg_url: str
    redis_url: str
    settings: str
    db_connection_limit: int
    soak: float = 0.0
    window: float = SOAK_WINDOW_S
    list_clients: int = 10
    list_rate: float = 0.5
    rss_tolerance: float = SOAK_RSS_TOLERANCE_MIB_PER_MIN

    @property
    def database(self) -> str:
        """The run's own database and role: the soak never drops a benchmark's."""
        return SOAK_DB if self.soak else BENCH_DB

    @property
    def prefix(self) -> str:
        """The run's Redis keys, channel-layer and cache prefix, and Celery queue."""
        return SOAK_PREFIX if self.soak else PREFIX

    @property
    def admin_url(self) -> str:
        return f"{self.pg_url}/postgres"

    @property
    def db_url(self) -> str:
        """The run's database, as its role (``--pg``'s host and port)."""
        parts = urlsplit(self.pg_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, f"{self.database}:{BENCH_ROLE_PASSWORD}@{host}", f"/{self.database}", "", ""))


def bench_env(opts: Options) -> dict[str, str]:
    """The environment of every process of the stack: its own database, Redis prefixes and
    queue, DEBUG off (else Django keeps every query in memory), rate limits out of the way."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=opts.db_url,
        REDIS_URL=opts.redis_url,
        CHANNELS_PREFIX=opts.prefix,
        CACHE_PREFIX=opts.prefix,
        CELERY_QUEUE=opts.prefix,
        JIGSAW_ENV="development",
        JIGSAW_STANDALONE="0",
        DEBUG="0",
        LOG_LEVEL="WARNING",
        ENGINE_BACKEND="local",
        API_RATE_PER_CALLER="100000000/min",
        API_RATE_JOB_CREATE="100000000/min",
        WS_MAX_SOCKETS_PER_USER="0",  # hundreds of sockets of one user: the load, not an abuse
        # The soak's Celery worker runs the submitted jobs on the simulated engine: enough
        # simulated GPUs that they run as fast as they come, so nothing piles up in the queue.
        ENGINE_NUM_NODES=str(SOAK_NODES),
        ENGINE_SPEED=str(SOAK_ENGINE_SPEED),
        DJANGO_SETTINGS_MODULE=opts.settings,
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env
