"""Control-plane benchmark on loopback: the real stack (uvicorn workers, PostgreSQL, Redis)
driven by real HTTP and WebSocket clients, measured against the performance targets.

    .venv/bin/python scripts/bench_control_plane.py [--duration 20] [--workers 2] [--json out.json]

Targets: job create p99 <= 50 ms at 50 concurrent clients; job list p99 <= 50 ms with 10,000
jobs in the table; 500 WebSocket clients receiving 1 Hz metric updates with delivery lag p99
<= 250 ms, every event exactly once.

What it does, in order (progress on stderr, the summary on stdout):
1. drops and creates its own database ``jigsaw_bench``, owned by a role of the same name whose
   connection limit (``--db-connection-limit``) keeps a run from taking every connection of a
   shared PostgreSQL; migrates it, seeds tenants, a user and one API token per client
   (``tenants.services``); its Redis keys, channel-layer groups and Celery queue all start with
   ``jigsaw-bench`` and are deleted at the end (no Celery worker runs: tasks just queue);
2. for each measured load, starts a fresh ``uvicorn webapp.asgi:application --workers N``
   with DEBUG off and the API rate limits raised (the limiter still runs: this measures
   capacity, not the limiter); ``--settings`` swaps the settings module to A/B a change;
3. create: ``--clients`` clients, each one keep-alive connection and its own token, POST
   /api/v1/jobs back to back (or ``--rate`` per client) with a fresh Idempotency-Key;
4. list: the jobs table is refilled to exactly ``--jobs-in-table`` jobs (a fifth of them the
   benchmark tenant's, a realistic status mix), then GET /api/v1/jobs and ?status=queued;
5. ws: ``--ws-clients`` sockets on /ws/v1/jobs/<id> (10 per job); a separate process ingests
   one metrics event per job per second through ``services.engine_events_ingest`` (stored in
   Postgres, published on commit through the Redis channel layer); each event carries its
   wall-clock time before ingest, so the lag covers ingest, channel layer, server batching and
   the socket. Every client must get every event of its job exactly once.

Latency is measured from when a request was due to be sent to when its response was read, so
a server that falls behind is charged for the wait (no coordinated omission). Not a test: it
lives outside ``tests/`` and never runs in the suite. Linux only (reads /proc for CPU use).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import redis
import soak_report  # scripts/: the soak's windows, memory trend and table
from websockets.asyncio.client import ClientConnection, connect

REPO = Path(__file__).resolve().parent.parent
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


# == options ==================================================================================
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


def parse_options(argv: Sequence[str]) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds measured per phase (default 20)")
    parser.add_argument(
        "--warmup", type=float, default=WARMUP_S, help=f"seconds of load before measuring (default {WARMUP_S:g})"
    )
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes (default 2)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent HTTP clients (default 50)")
    parser.add_argument("--ws-clients", type=int, default=500, help="WebSocket clients (default 500)")
    parser.add_argument("--jobs-in-table", type=int, default=10_000, help="jobs in the table for list (10,000)")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="requests per second per HTTP client; 0 (default): back to back"
    )
    parser.add_argument("--only", default=",".join(PHASES), help="phases to run: create,list,ws (default all)")
    parser.add_argument("--json", dest="json_path", type=Path, help="write the full report here")
    parser.add_argument("--keep-db", action="store_true", help=f"leave the {BENCH_DB} database in place")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis URL")
    parser.add_argument(
        "--settings", default="webapp.settings", help="DJANGO_SETTINGS_MODULE for every process (A/B a settings change)"
    )
    parser.add_argument(
        "--db-connection-limit",
        type=int,
        default=60,
        help="most connections the server may open (a limit on its own role; default 60 of the usual 100)",
    )
    soak = parser.add_argument_group(
        "soak", "--soak S runs create, list and WebSocket load together for S seconds, with a Celery worker"
    )
    soak.add_argument("--soak", type=float, default=0.0, help="seconds of sustained load (default 0: no soak)")
    soak.add_argument(
        "--window", type=float, default=SOAK_WINDOW_S, help=f"seconds per reported window (default {SOAK_WINDOW_S:g})"
    )
    soak.add_argument("--list-clients", type=int, default=10, help="soak: clients listing jobs (default 10)")
    soak.add_argument("--list-rate", type=float, default=0.5, help="soak: lists per second per client (default 0.5)")
    soak.add_argument(
        "--rss-tolerance",
        type=float,
        default=SOAK_RSS_TOLERANCE_MIB_PER_MIN,
        help=f"soak: |RSS slope| that still counts as flat, MiB/min (default {SOAK_RSS_TOLERANCE_MIB_PER_MIN:g})",
    )
    args = parser.parse_args(argv)
    if args.soak:
        if args.soak < 2 * args.window:
            parser.error(f"--soak: at least two windows (2 x --window = {2 * args.window:g} s), got {args.soak:g}")
        if args.rate <= 0:
            args.rate = SOAK_CREATE_RATE  # a soak runs at a steady rate; back to back only measures saturation
        if args.list_clients > args.clients or args.list_rate <= 0:
            parser.error("--list-clients: at most --clients (they share its tokens), with --list-rate > 0")
    only = tuple(p for p in PHASES if p in {s.strip() for s in args.only.split(",")})
    unknown = {s.strip() for s in args.only.split(",")} - set(PHASES)
    if unknown or not only:
        parser.error(f"--only: choose from {','.join(PHASES)}, got {args.only!r}")
    if args.ws_clients % WS_CLIENTS_PER_JOB:
        parser.error(f"--ws-clients: a multiple of {WS_CLIENTS_PER_JOB} (clients per job)")
    return Options(
        duration=args.duration,
        warmup=args.warmup,
        workers=args.workers,
        clients=args.clients,
        ws_clients=args.ws_clients,
        jobs_in_table=args.jobs_in_table,
        rate=args.rate,
        only=only,
        json_path=args.json_path,
        keep_db=args.keep_db,
        pg_url=args.pg.rstrip("/"),
        redis_url=args.redis,
        settings=args.settings,
        db_connection_limit=args.db_connection_limit,
        soak=args.soak,
        window=args.window,
        list_clients=args.list_clients,
        list_rate=args.list_rate,
        rss_tolerance=args.rss_tolerance,
    )


def bench_env(opts: Options) -> dict[str, str]:
    """The environment of every process of the stack: its own database, Redis prefixes and
    queue, DEBUG off (else Django keeps every query in memory), rate limits out of the way."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=bench_db_url(opts.pg_url),
        REDIS_URL=opts.redis_url,
        CHANNELS_PREFIX=PREFIX,
        CACHE_PREFIX=PREFIX,
        CELERY_QUEUE=PREFIX,
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
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


# == statistics ===============================================================================
def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0-100) of values sorted ascending."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_summary(values_ms: Sequence[float]) -> dict[str, Any]:
    if not values_ms:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    ordered = sorted(values_ms)
    return {
        "n": len(ordered),
        "p50_ms": round(percentile(ordered, 50), 2),
        "p95_ms": round(percentile(ordered, 95), 2),
        "p99_ms": round(percentile(ordered, 99), 2),
        "max_ms": round(ordered[-1], 2),
        "mean_ms": round(sum(ordered) / len(ordered), 2),
    }


def windowed_p99(samples: Sequence[tuple[float, float]], span_s: float) -> list[dict[str, Any]]:
    """p99 per ``WINDOW_S`` window of (seconds since the phase began, latency ms) samples."""
    count = max(1, math.ceil(span_s / WINDOW_S))
    buckets: list[list[float]] = [[] for _ in range(count)]
    for t, ms in samples:
        buckets[min(count - 1, max(0, int(t // WINDOW_S)))].append(ms)
    return [
        {
            "from_s": i * WINDOW_S,
            "n": len(b),
            "p99_ms": round(percentile(sorted(b), 99), 2) if b else None,
        }
        for i, b in enumerate(buckets)
    ]


# == machine and resource use =================================================================
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_stat_fields(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants (uvicorn's workers are children of its supervisor)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents.setdefault(int(_proc_stat_fields(int(entry.name))[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(parents.get(pid, []))
    return tree


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) used so far by ``root`` and its live descendants."""
    total = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _proc_stat_fields(pid)
            total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def system_cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all cores since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


def machine_info(opts: Options) -> dict[str, Any]:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "cpu_count": os.cpu_count(),
        "nproc": int(nproc) if nproc.isdigit() else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "server_workers": opts.workers,
    }


class Sampler(threading.Thread):
    """Every half second: the 1-minute load average and the open connections to the bench
    database (per-request connections show here)."""

    def __init__(self, admin_url: str) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.admin_url = admin_url
        self.samples: list[tuple[float, float, int]] = []  # (monotonic time, load1, db connections)
        self.stopped = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self.stopped.wait(0.5):
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (BENCH_DB,)).fetchone()
                self.samples.append((time.monotonic(), os.getloadavg()[0], int(row[0]) if row else 0))

    def between(self, start: float, end: float) -> dict[str, Any]:
        inside = [s for s in self.samples if start <= s[0] <= end]
        if not inside:
            return {}
        loads = [s[1] for s in inside]
        return {
            "load1_min": round(min(loads), 2),
            "load1_max": round(max(loads), 2),
            "load1_mean": round(sum(loads) / len(loads), 2),
            "db_connections_max": max(s[2] for s in inside),
        }


def db_sessions(admin_url: str) -> int:
    """Sessions ever opened on the bench database (PostgreSQL 14+; flushed within ~1 s)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (BENCH_DB,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@dataclass
class PhaseMeter:
    """CPU, load and database sessions over one phase."""

    server_pid: int
    sampler: Sampler
    admin_url: str
    start: float = 0.0
    system: tuple[int, int] = (0, 0)
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    sessions: int = 0

    def begin(self) -> PhaseMeter:
        self.start = time.monotonic()
        self.system = system_cpu_ticks()
        self.server_cpu = tree_cpu_s(self.server_pid)
        self.client_cpu = time.process_time()
        self.sessions = db_sessions(self.admin_url)
        return self

    def result(self) -> dict[str, Any]:
        wall = time.monotonic() - self.start
        busy, total = system_cpu_ticks()
        cores = os.cpu_count() or 1
        system_busy = (busy - self.system[0]) / max(1, total - self.system[1]) * cores
        server = (tree_cpu_s(self.server_pid) - self.server_cpu) / wall
        client = (time.process_time() - self.client_cpu) / wall
        time.sleep(1.2)  # backends flush their session counts about once a second
        return {
            "wall_s": round(wall, 1),
            "cores_busy_all_processes": round(system_busy, 2),
            "cores_server": round(server, 2),
            "cores_load_generator": round(client, 2),
            "cores_other": round(max(0.0, system_busy - server - client), 2),
            "db_sessions_opened": db_sessions(self.admin_url) - self.sessions,
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            **self.sampler.between(self.start, time.monotonic()),
        }


# == the stack: database, Redis, Django-side steps, the server ================================
def bench_db_url(pg_url: str) -> str:
    """The bench database, as the bench role (``--pg``'s host and port)."""
    parts = urlsplit(pg_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{BENCH_DB}:{BENCH_ROLE_PASSWORD}@{host}", f"/{BENCH_DB}", "", ""))


def reset_database(admin_url: str, connection_limit: int) -> None:
    """A fresh database owned by a role of its own. The role is not a superuser, so its
    connection limit holds: a run can never take every connection of a shared PostgreSQL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{BENCH_DB}"')
        conn.execute(
            f'CREATE ROLE "{BENCH_DB}" LOGIN CONNECTION LIMIT {int(connection_limit)} '
            f"PASSWORD '{BENCH_ROLE_PASSWORD}'"
        )
        conn.execute(f'CREATE DATABASE "{BENCH_DB}" OWNER "{BENCH_DB}"')


def drop_database(admin_url: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{BENCH_DB}"')


def purge_redis(url: str) -> dict[str, int]:
    """Delete the bench's keys only (Redis is shared): queued Celery tasks, channel-layer
    groups, throttle counters. Returns how many keys and queued Celery messages there were."""
    client = redis.Redis.from_url(url)
    try:
        queued = int(client.llen(PREFIX))
        deleted = 0
        for pattern in (f"{PREFIX}*", f"_kombu.binding.{PREFIX}*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            for start in range(0, len(keys), 500):
                deleted += int(client.delete(*keys[start : start + 500]))
        return {"keys_deleted": deleted, "celery_messages_purged": queued}
    finally:
        client.close()


def run_django_step(env: dict[str, str], step: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one of ``DJANGO_STEPS`` in a child process set up like the server."""
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "_django", step, json.dumps(args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return _step_result(step, proc.returncode, proc.stdout, proc.stderr)


def _step_result(step: str, returncode: int | None, stdout: str, stderr: str) -> dict[str, Any]:
    results = [line for line in stdout.splitlines() if line.startswith(RESULT_MARK)]
    if returncode != 0 or not results:
        raise BenchError(f"step {step} failed (exit {returncode}):\n{stderr[-4000:]}")
    parsed: dict[str, Any] = json.loads(results[-1][len(RESULT_MARK) :])
    return parsed


def migrate(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise BenchError(f"migrate failed:\n{proc.stderr[-4000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def log_excerpt(self, chars: int = 3000) -> str:
        """The first and the last ``chars`` of the log: the first failure and how it ended."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text if len(text) <= 2 * chars else f"{text[:chars]}\n[...]\n{text[-chars:]}"


def start_server(env: dict[str, str], workers: int, log_dir: Path) -> Server:
    port = free_port()
    log_path = log_dir / f"uvicorn-{port}.log"
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "webapp.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--lifespan",
        "off",  # Django answers HTTP and WebSocket only
        "--no-access-log",
        "--log-level",
        "warning",
        "--timeout-graceful-shutdown",
        "5",
        "--timeout-keep-alive",
        str(KEEP_ALIVE_S),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    return Server(process=process, base_url=f"http://127.0.0.1:{port}", log_path=log_path)


async def wait_ready(server: Server, token: str, workers: int, timeout_s: float = 90.0) -> None:
    """Ready when GET /api/v1/me answers 200 on fresh connections twice per worker in a row
    (a worker still importing Django does not accept, so the others answer meanwhile)."""
    deadline = time.monotonic() + timeout_s
    streak = 0
    while streak < 2 * workers:
        if server.process.poll() is not None:
            raise BenchError(f"the server exited ({server.process.returncode}):\n{server.log_tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"the server was not ready within {timeout_s:.0f} s:\n{server.log_tail()}")
        try:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
                response = await client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
            streak = streak + 1 if response.status_code == 200 else 0
        except httpx.HTTPError:
            streak = 0
        if streak == 0:
            await asyncio.sleep(0.3)


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)  # uvicorn's supervisor stops its workers
        try:
            server.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            for pid in reversed(process_tree(server.process.pid)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            server.process.wait(timeout=5)


# == HTTP load ================================================================================
Request = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


@dataclass
class LoadRecord:
    samples: list[tuple[float, float]] = field(default_factory=list)  # (s since measuring began, ms)
    errors: Counter[str] = field(default_factory=Counter)
    error_times: list[float] = field(default_factory=list)  # s since measuring began
    response_bytes: int = 0


async def run_clients(
    base_url: str,
    tokens: Sequence[str],
    request: Request,
    expect: int,
    duration_s: float,
    rate: float,
    warmup_s: float = WARMUP_S,
) -> LoadRecord:
    """One keep-alive connection per client; a warm-up, then ``duration_s`` measured. With
    ``rate`` each client sends on a fixed schedule and latency counts from the scheduled time."""
    loop = asyncio.get_running_loop()
    begin = loop.time()
    measure_from = begin + warmup_s
    end = measure_from + duration_s
    record = LoadRecord()

    async def client(index: int) -> None:
        interval = 1.0 / rate if rate > 0 else 0.0
        due = begin + (index / len(tokens)) * interval  # spread paced clients over one interval
        async with httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {tokens[index]}"},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=30.0,
        ) as http:
            while True:
                if interval:
                    if due >= end:
                        return  # not sleeping till a send that would not happen (slow rates)
                    await asyncio.sleep(max(0.0, due - loop.time()))
                    sent_at, due = due, due + interval
                else:
                    sent_at = loop.time()
                if sent_at >= end:
                    return
                outcome, size = await _one_request(http, request, expect)
                if sent_at >= measure_from:
                    record.samples.append((sent_at - measure_from, (loop.time() - sent_at) * 1000))
                    record.response_bytes += size
                    if outcome:
                        record.errors[outcome] += 1
                        record.error_times.append(sent_at - measure_from)

    await asyncio.gather(*(client(i) for i in range(len(tokens))))
    return record


async def _one_request(http: httpx.AsyncClient, request: Request, expect: int) -> tuple[str, int]:
    """Send one request: ('' when it got the expected status, else what went wrong; body bytes)."""
    try:
        response = await request(http)
    except httpx.HTTPError as exc:
        return type(exc).__name__, 0
    outcome = "" if response.status_code == expect else f"HTTP {response.status_code}"
    return outcome, len(response.content)


def load_result(record: LoadRecord, duration_s: float, clients: int, rate: float) -> dict[str, Any]:
    errors = sum(record.errors.values())
    return {
        "clients": clients,
        "rate_per_client": rate or "back to back",
        "duration_s": duration_s,
        "requests": len(record.samples),
        "errors": errors,
        "errors_by_kind": dict(record.errors),
        "throughput_rps": round((len(record.samples) - errors) / duration_s, 1),
        "mean_response_bytes": round(record.response_bytes / max(1, len(record.samples))),
        "latency": latency_summary([ms for _, ms in record.samples]),  # failed requests included
        "p99_by_window": windowed_p99(record.samples, duration_s),
    }


async def probe(base_url: str, token: str, request: Request, expect: int) -> httpx.Response:
    """One untimed request first: a wrong setup fails here with the server's answer."""
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        response = await request(http)
    if response.status_code != expect:
        raise BenchError(f"probe: expected HTTP {expect}, got {response.status_code}: {response.text[:1000]}")
    return response


def create_request() -> Request:
    body = json.dumps({"name": "bench", "spec": BENCH_SPEC}).encode()

    async def submit(http: httpx.AsyncClient) -> httpx.Response:
        headers = {"Idempotency-Key": str(uuid.uuid4()), "Content-Type": "application/json"}
        return await http.post("/api/v1/jobs", content=body, headers=headers)

    return submit


def list_request(query: str) -> Request:
    async def fetch(http: httpx.AsyncClient) -> httpx.Response:
        return await http.get(f"/api/v1/jobs{query}")

    return fetch


# == WebSocket fan-out ========================================================================
@dataclass
class WsLog:
    """What one socket received."""

    job_id: str
    seqs: Counter[int] = field(default_factory=Counter)
    lags: list[tuple[float, float]] = field(default_factory=list)  # (receive wall time, lag ms)
    other_frames: Counter[str] = field(default_factory=Counter)
    connect_ms: float | None = None
    error: str | None = None
    error_at: float | None = None  # wall time of a drop after connecting

    def take(self, frame: dict[str, Any], received_at: float) -> None:
        if frame.get("type") == "events":  # v1: batches
            events = list(frame.get("events") or [])
        elif frame.get("type") == "event":  # the dashboard's path: one per frame
            events = [frame["event"]]
        else:
            self.other_frames[str(frame.get("type"))] += 1
            return
        for event in events:
            self.seqs[int(event["seq"])] += 1
            sent_at = (event.get("data") or {}).get("metrics", {}).get(SENT_AT)
            if sent_at is not None:
                self.lags.append((received_at, (received_at - float(sent_at)) * 1000))


async def open_socket(base_url: str, token: str, log: WsLog, gate: asyncio.Semaphore) -> ClientConnection | None:
    """Connect and wait for the first frame (the stream is live from then on)."""
    url = base_url.replace("http://", "ws://") + WS_PATH.format(job_id=log.job_id)
    async with gate:
        started = time.perf_counter()
        try:
            ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=60)
            first = await asyncio.wait_for(ws.recv(), timeout=60)
        except Exception as exc:  # any failure is a finding, not a crash
            log.error = f"{type(exc).__name__}: {exc}"[:200]
            return None
        log.connect_ms = (time.perf_counter() - started) * 1000
        log.take(json.loads(first), time.time())
        return ws


async def listen(ws: ClientConnection, log: WsLog) -> None:
    try:
        async for raw in ws:
            log.take(json.loads(raw), time.time())
    except Exception as exc:  # a dropped socket is reported, not raised
        log.error = f"{type(exc).__name__}: {exc}"[:200]
        log.error_at = time.time()


def delivery_counts(logs: Sequence[WsLog], published: dict[str, int]) -> dict[str, int]:
    """Against what was published: events never received, received twice, or unknown."""
    missing = duplicates = unexpected = 0
    for log in logs:
        expected = published.get(log.job_id, 0)
        got = set(log.seqs)
        missing += sum(1 for seq in range(1, expected + 1) if seq not in got)
        duplicates += sum(n - 1 for n in log.seqs.values() if n > 1)
        unexpected += sum(1 for seq in got if seq > expected)
    return {"missing": missing, "duplicates": duplicates, "unexpected": unexpected}


async def wait_delivered(logs: Sequence[WsLog], published: dict[str, int], limit_s: float) -> float:
    """Wait until every open socket has its job's events (or ``limit_s``); seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if all(len(log.seqs) >= published.get(log.job_id, 0) for log in logs if log.error is None):
            break
        await asyncio.sleep(0.2)
    return time.monotonic() - started


# == phases ===================================================================================
@dataclass
class Stack:
    """What every phase needs. Each measured load gets a fresh server, so that what one load
    leaves behind (open connections, warm caches) is not charged to the next."""

    opts: Options
    env: dict[str, str]  # the server's and the publisher's (the capped role)
    harness_env: dict[str, str]  # the benchmark's own table fills (the admin role: never refused)
    tokens: list[str]
    sampler: Sampler
    log_dir: Path
    server_logs: list[str] = field(default_factory=list)

    @property
    def admin_url(self) -> str:
        return f"{self.opts.pg_url}/postgres"

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Server]:
        server = start_server(self.env, self.opts.workers, self.log_dir)
        try:
            await wait_ready(server, self.tokens[0], self.opts.workers)
            yield server
        finally:
            stop_server(server)
            self.server_logs.append(server.log_excerpt())

    def meter(self, server: Server) -> PhaseMeter:
        """Started now; ``result()`` at the end of the load."""
        return PhaseMeter(server.process.pid, self.sampler, self.admin_url).begin()


async def measure_http(stack: Stack, name: str, request: Request, expect: int) -> dict[str, Any]:
    """One HTTP load on a fresh server: a probe, the warm-up, then the measured seconds."""
    opts = stack.opts
    async with stack.serving() as server:
        first = await probe(server.base_url, stack.tokens[0], request, expect)
        progress(f"{name}: {opts.clients} clients, {opts.warmup:.0f} s warm-up + {opts.duration:.0f} s")
        meter = stack.meter(server)
        record = await run_clients(
            server.base_url, stack.tokens[: opts.clients], request, expect, opts.duration, opts.rate, opts.warmup
        )
        result = {
            **load_result(record, opts.duration, opts.clients, opts.rate),
            "content_type": first.headers.get("content-type"),
            "resources": meter.result(),
        }
    if result["errors"]:
        result["server_log"] = stack.server_logs[-1]
    progress(f"{name}: done, p99 {result['latency']['p99_ms']} ms, {result['throughput_rps']} ok/s")
    return result


async def phase_create(stack: Stack) -> dict[str, Any]:
    return await measure_http(stack, "create", create_request(), 201)


async def phase_list(stack: Stack) -> dict[str, dict[str, Any]]:
    opts = stack.opts
    bench_jobs = max(1, opts.jobs_in_table // 5)
    progress(f"list: refilling the table with {opts.jobs_in_table} jobs ({bench_jobs} of the benchmark tenant)")
    table = await asyncio.to_thread(
        run_django_step, stack.harness_env, "fill_table", {"total": opts.jobs_in_table, "bench_jobs": bench_jobs}
    )
    results: dict[str, dict[str, Any]] = {}
    for name, query in (("list", ""), ("list_queued", "?status=queued")):
        results[name] = {**await measure_http(stack, name, list_request(query), 200), "table": table}
    return results


async def phase_ws(stack: Stack) -> dict[str, Any]:
    opts = stack.opts
    jobs = opts.ws_clients // WS_CLIENTS_PER_JOB
    made = await asyncio.to_thread(run_django_step, stack.harness_env, "ws_jobs", {"jobs": jobs})
    job_ids: list[str] = made["job_ids"]
    logs = [WsLog(job_id=job_ids[i % jobs]) for i in range(opts.ws_clients)]
    async with stack.serving() as server:
        progress(f"ws: opening {opts.ws_clients} sockets on {jobs} jobs")
        gate = asyncio.Semaphore(WS_CONNECTS_AT_ONCE)
        tokens = stack.tokens
        sockets = await asyncio.gather(
            *(open_socket(server.base_url, tokens[i % len(tokens)], log, gate) for i, log in enumerate(logs))
        )
        open_ws = [(ws, log) for ws, log in zip(sockets, logs, strict=True) if ws is not None]
        progress(f"ws: {len(open_ws)} open; publishing 1 event/s per job for {opts.duration:.0f} s")
        listeners = [asyncio.create_task(listen(ws, log)) for ws, log in open_ws]
        try:
            meter = stack.meter(server)
            start_at = time.time() + PUBLISHER_START_S
            published = await publish(stack.env, job_ids, opts.duration, start_at)
            drained_s = await wait_delivered([log for _, log in open_ws], published["published"], WS_DRAIN_S)
            result = ws_result(logs, published, start_at, drained_s, opts)
            result["resources"] = meter.result()
        finally:
            await asyncio.gather(*(ws.close() for ws, _ in open_ws), return_exceptions=True)
            closed_early = {log.job_id for _, log in open_ws if log.error}
            for task in listeners:
                task.cancel()
            await asyncio.gather(*listeners, return_exceptions=True)
    if closed_early or result["delivery"]["missing"]:
        result["server_log"] = stack.server_logs[-1]
    progress(f"ws: done, lag p99 {result['lag']['p99_ms']} ms, missing {result['delivery']['missing']}")
    return result


async def publish(
    env: dict[str, str], job_ids: list[str], duration_s: float, start_at: float, deadline: float | None = None
) -> dict[str, Any]:
    """The publisher runs in its own process, as the event pump does in a Celery worker."""
    args = json.dumps({"job_ids": job_ids, "duration": duration_s, "start_at": start_at, "deadline": deadline})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve()),
        "_django",
        "publish",
        args,
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await proc.communicate()
    return _step_result("publish", proc.returncode, stdout.decode(), stderr.decode())


def ws_result(
    logs: Sequence[WsLog], published: dict[str, Any], start_at: float, drained_s: float, opts: Options
) -> dict[str, Any]:
    connected = [log for log in logs if log.connect_ms is not None]
    lag_samples = [(at - start_at, ms) for log in logs for at, ms in log.lags]
    expected = sum(published["published"].get(log.job_id, 0) for log in connected)
    failures = Counter(log.error.split(":")[0] for log in logs if log.error)
    return {
        "clients": opts.ws_clients,
        "jobs": len(published["published"]),
        "connected": len(connected),
        "connect": latency_summary([log.connect_ms for log in connected if log.connect_ms is not None]),
        "client_errors": dict(failures),
        "client_error_examples": sorted({log.error for log in logs if log.error})[:5],
        "events_published": published["events"],
        "messages_expected": expected,
        "messages_received": sum(sum(log.seqs.values()) for log in connected),
        "delivery": delivery_counts(connected, published["published"]),
        "other_frames": dict(sum((log.other_frames for log in logs), Counter())),
        "drain_wait_s": round(drained_s, 1),
        "lag": latency_summary([ms for _, ms in lag_samples]),
        "p99_by_window": windowed_p99(lag_samples, opts.duration + 2),
        "publisher": {k: v for k, v in published.items() if k != "published"},
    }


# == soak: everything at once, for minutes ====================================================
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
LOG_ERROR_MARKS = (" ERROR", " CRITICAL", "ERROR/", "CRITICAL/")


def use_soak_namespace() -> None:
    """The soak's own database, role and Redis prefix (every helper reads these at call time)."""
    global BENCH_DB, PREFIX
    BENCH_DB, PREFIX = SOAK_DB, SOAK_PREFIX


def engine_history_fills_s() -> float:
    """Wall seconds after which the worker's simulated engine holds as much past as it ever will:
    it keeps an hour of engine time (``LocalEngine``'s retention; 3 minutes of wall time at speed
    20) and prunes a sixteenth of that late at most. Its memory grows until then by design."""
    from jigsaw_engine.control.cluster_controller import PRUNES_PER_RETENTION
    from jigsaw_engine.control.local_engine import retention_s

    return retention_s(SOAK_ENGINE_SPEED) / SOAK_ENGINE_SPEED * (1 + 1 / PRUNES_PER_RETENTION)


def rss_by_process(root: int) -> dict[int, int]:
    """Resident bytes of ``root`` and each descendant (uvicorn's workers, Celery's pool and beat)."""
    sizes = {}
    for pid in process_tree(root):
        with contextlib.suppress(OSError, ValueError, IndexError):
            sizes[pid] = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
    return sizes


def process_label(pid: int) -> str:
    with contextlib.suppress(OSError):
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        return " ".join(w for w in words if w)[:80]
    return "?"


class SoakMeter(threading.Thread):
    """Every ``SOAK_SAMPLE_S``: the RSS of each process group (summed over its processes) and the
    backlog of the Celery queue (tasks waiting: a worker that falls behind shows here)."""

    def __init__(self, roots: dict[str, int], redis_url: str) -> None:
        super().__init__(name="soak-meter", daemon=True)
        self.roots = roots
        self.redis_url = redis_url
        self.rss: dict[str, list[tuple[float, int]]] = {name: [] for name in roots}
        self.backlog: list[tuple[float, int]] = []
        self.first: dict[str, dict[int, int]] = {}
        self.last: dict[str, dict[int, int]] = {}
        self.labels: dict[int, str] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        client = redis.Redis.from_url(self.redis_url)
        try:
            while True:
                now = time.time()
                for name, root in self.roots.items():
                    sizes = rss_by_process(root)
                    self.rss[name].append((now, sum(sizes.values())))
                    self.first.setdefault(name, sizes)
                    self.last[name] = sizes
                    for pid in sizes.keys() - self.labels.keys():
                        self.labels[pid] = process_label(pid)
                self.backlog.append((now, int(client.llen(PREFIX))))
                if self.stopped.wait(SOAK_SAMPLE_S):
                    return
        finally:
            client.close()

    def processes(self) -> dict[str, list[dict[str, Any]]]:
        """Each process at the first and the last sample, MiB."""
        return {
            name: [
                {
                    "pid": pid,
                    "command": self.labels.get(pid, "?"),
                    "first_mib": round(self.first.get(name, {}).get(pid, 0) / 2**20, 1),
                    "last_mib": round(size / 2**20, 1),
                }
                for pid, size in sorted(sizes.items())
            ]
            for name, sizes in self.last.items()
        }


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log_path: Path


def start_worker(env: dict[str, str], log_dir: Path) -> Worker:
    """A Celery worker with beat embedded, on the bench queue. One pool process: with the local
    engine every process hosts its own engine, and dispatch, the event pump and the reconciler
    must all see the same one (the Ray backend shares one engine between any number)."""
    log_path = log_dir / "celery-worker.log"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "webapp.celery_app",
        "worker",
        "--beat",
        "--schedule",
        str(log_dir / "celerybeat-schedule"),
        "--concurrency",
        "1",
        "--queues",
        PREFIX,
        "--hostname",
        f"{PREFIX}@%h",
        "--without-gossip",  # other workers may share this Redis: no chatter with them
        "--without-mingle",
        "--loglevel",
        "WARNING",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    return Worker(process=process, log_path=log_path)


async def wait_worker_ready(worker: Worker, timeout_s: float = 90.0) -> None:
    """Ready when its pool process and beat have been forked (main + beat + pool child)."""
    deadline = time.monotonic() + timeout_s
    while len(process_tree(worker.process.pid)) < 3:
        if worker.process.poll() is not None:
            raise BenchError(f"the Celery worker exited ({worker.process.returncode}):\n{log_text(worker.log_path)}")
        if time.monotonic() > deadline:
            raise BenchError(f"the Celery worker did not start within {timeout_s:.0f} s:\n{log_text(worker.log_path)}")
        await asyncio.sleep(0.5)


def stop_worker(worker: Worker) -> None:
    if worker.process.poll() is None:
        worker.process.send_signal(signal.SIGTERM)  # warm shutdown: the running task finishes
        try:
            worker.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for pid in reversed(process_tree(worker.process.pid)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            worker.process.wait(timeout=5)


def log_text(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def log_errors(path: Path) -> list[str]:
    """What a process log reports as errors: ERROR/CRITICAL lines, and for each traceback its
    exception (the first unindented line after it)."""
    if not path.exists():
        return []
    found, in_traceback = [], False
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and line and not line.startswith((" ", "\t")):
            found.append(f"exception: {line}")
            in_traceback = False
        elif any(mark in line for mark in LOG_ERROR_MARKS):
            found.append(line)
    return found


async def phase_soak(stack: Stack) -> dict[str, Any]:
    """Create, list and WebSocket load at once, with a Celery worker admitting, dispatching and
    pumping the submitted jobs through the local (simulated) engine; latency, errors and memory
    every ``--window`` seconds."""
    opts = stack.opts
    progress(f"soak: the table gets {opts.jobs_in_table} finished jobs (history for the list)")
    table = await asyncio.to_thread(
        run_django_step,
        stack.harness_env,
        "fill_table",
        {"total": opts.jobs_in_table, "bench_jobs": max(1, opts.jobs_in_table // 5), "finished_only": True},
    )
    jobs = opts.ws_clients // WS_CLIENTS_PER_JOB
    made = await asyncio.to_thread(
        run_django_step, stack.harness_env, "ws_jobs", {"jobs": jobs, "hold_capacity": False}
    )
    job_ids: list[str] = made["job_ids"]
    logs = [WsLog(job_id=job_ids[i % jobs]) for i in range(opts.ws_clients)]
    worker = start_worker(stack.env, stack.log_dir)
    try:
        async with stack.serving() as server:
            await wait_worker_ready(worker)
            await probe(server.base_url, stack.tokens[0], create_request(), 201)
            progress(f"soak: opening {opts.ws_clients} sockets on {jobs} jobs")
            gate = asyncio.Semaphore(WS_CONNECTS_AT_ONCE)
            sockets = await asyncio.gather(
                *(
                    open_socket(server.base_url, stack.tokens[i % len(stack.tokens)], log, gate)
                    for i, log in enumerate(logs)
                )
            )
            open_ws = [(ws, log) for ws, log in zip(sockets, logs, strict=True) if ws is not None]
            listeners = [asyncio.create_task(listen(ws, log)) for ws, log in open_ws]
            meter = SoakMeter({"server": server.process.pid, "worker": worker.process.pid}, opts.redis_url)
            try:
                progress(
                    f"soak: {opts.warmup:.0f} s warm-up + {opts.soak:.0f} s: {opts.clients} clients x "
                    f"{opts.rate:g} creates/s, {opts.list_clients} x {opts.list_rate:g} lists/s, "
                    f"{len(open_ws)} sockets on 1 Hz metrics"
                )
                resources = stack.meter(server)
                start_wall = time.time()
                meter.start()
                tokens = stack.tokens
                create, listing, published = await asyncio.gather(
                    run_clients(server.base_url, tokens, create_request(), 201, opts.soak, opts.rate, opts.warmup),
                    run_clients(
                        server.base_url,
                        tokens[: opts.list_clients],
                        list_request(""),
                        200,
                        opts.soak,
                        opts.list_rate,
                        opts.warmup,
                    ),
                    publish(
                        stack.env, job_ids, opts.warmup + opts.soak, start_wall, start_wall + opts.warmup + opts.soak
                    ),
                )
                meter.stopped.set()
                drained_s = await wait_delivered([log for _, log in open_ws], published["published"], WS_DRAIN_S)
                usage = resources.result()
                alive = {"server": server.process.poll() is None, "worker": worker.process.poll() is None}
                server_errors = log_errors(server.log_path)
            finally:
                meter.stopped.set()
                meter.join(timeout=10)
                await asyncio.gather(*(ws.close() for ws, _ in open_ws), return_exceptions=True)
                for task in listeners:
                    task.cancel()
                await asyncio.gather(*listeners, return_exceptions=True)
    finally:
        stop_worker(worker)
    outcomes = await asyncio.to_thread(run_django_step, stack.harness_env, "job_outcomes", {"name": "bench"})
    measure_from = start_wall + opts.warmup
    result = soak_result(
        opts,
        create=create,
        listing=listing,
        logs=logs,
        published=published,
        measure_from=measure_from,
        meter=meter,
    )
    result.update(
        table=table,
        drain_wait_s=round(drained_s, 1),
        resources=usage,
        processes_alive=alive,
        log_errors={"server": server_errors[:20], "worker": log_errors(worker.log_path)[:20]},
        jobs_submitted=outcomes,
    )
    result["verdict"] = soak_verdict(result)
    if result["verdict"]["errors"]:
        result["server_log"] = stack.server_logs[-1]
        result["worker_log"] = log_text(worker.log_path, 6000)
    progress(
        f"soak: done, {result['verdict']['errors']} errors, memory {'flat' if result['memory']['flat'] else 'NOT flat'}"
    )
    return result


def soak_result(
    opts: Options,
    *,
    create: LoadRecord,
    listing: LoadRecord,
    logs: Sequence[WsLog],
    published: dict[str, Any],
    measure_from: float,
    meter: SoakMeter,
) -> dict[str, Any]:
    duration, window = opts.soak, opts.window
    connected = [log for log in logs if log.connect_ms is not None]
    lag_samples = [(at - measure_from, ms) for log in connected for at, ms in log.lags]
    drops = [log.error_at - measure_from for log in connected if log.error_at is not None]
    missing_at = [
        (seq - 1) - opts.warmup  # the job's event seq k was published at tick k-1
        for log in connected
        for seq in range(1, published["published"].get(log.job_id, 0) + 1)
        if seq not in log.seqs
    ]
    creates = soak_report.latency_windows(create.samples, create.error_times, duration, window)
    lists = soak_report.latency_windows(listing.samples, listing.error_times, duration, window)
    ws = soak_report.latency_windows(lag_samples, [*drops, *missing_at], duration, window)
    rss = {name: [(t - measure_from, float(v)) for t, v in samples] for name, samples in meter.rss.items()}
    rss_at = {name: soak_report.value_windows(samples, duration, window) for name, samples in rss.items()}
    backlog = soak_report.value_windows([(t - measure_from, float(n)) for t, n in meter.backlog], duration, window)
    rows = []
    for i, (c, li, w) in enumerate(zip(creates, lists, ws, strict=True)):
        rows.append(
            {
                "from_s": c["from_s"],
                "create_n": c["n"],
                **{f"create_p{q}_ms": c[f"p{q}_ms"] for q in (50, 95, 99)},
                "list_n": li["n"],
                **{f"list_p{q}_ms": li[f"p{q}_ms"] for q in (50, 95, 99)},
                "errors": c["errors"] + li["errors"] + w["errors"],
                "ws_events": w["n"],
                "ws_p99_ms": w["p99_ms"],
                "rss_server_mib": _mib(rss_at["server"][i]),
                "rss_worker_mib": _mib(rss_at["worker"][i]),
                "celery_backlog": None if backlog[i] is None else int(backlog[i]),
            }
        )
    return {
        "duration_s": duration,
        "window_s": window,
        "warmup_s": opts.warmup,
        "load": {
            "create": f"{opts.clients} clients x {opts.rate:g}/s",
            "list": f"{opts.list_clients} clients x {opts.list_rate:g}/s",
            "ws": f"{opts.ws_clients} sockets on {len(published['published'])} jobs, 1 event/s per job",
        },
        "windows": rows,
        "create": load_result(create, duration, opts.clients, opts.rate),
        "list": load_result(listing, duration, opts.list_clients, opts.list_rate),
        "ws": {
            "clients": len(logs),
            "connected": len(connected),
            "dropped": len(drops),
            "client_errors": sorted({log.error for log in logs if log.error})[:5],
            "events_published": published["events"],
            "delivery": delivery_counts(connected, published["published"]),
            "lag": latency_summary([ms for t, ms in lag_samples if 0 <= t <= duration]),
            "publisher": {k: v for k, v in published.items() if k != "published"},
        },
        "memory": soak_report.memory_verdict(rss, duration, opts.rss_tolerance, {"worker": engine_history_fills_s()}),
        "processes": meter.processes(),
    }


def _mib(value: float | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)


def soak_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """Every error counted once; the soak passes with none and flat memory."""
    ws = result["ws"]
    counts = {
        "create": result["create"]["errors"],
        "list": result["list"]["errors"],
        "ws_unconnected": ws["clients"] - ws["connected"],
        "ws_dropped": ws["dropped"],
        "ws_missing": ws["delivery"]["missing"],
        "ws_duplicates": ws["delivery"]["duplicates"],
        "ws_events_unsent": ws["publisher"].get("unsent", 0),  # ingest could not keep 1 Hz
        "log_errors": sum(len(lines) for lines in result["log_errors"].values()),
        "jobs_failed": result["jobs_submitted"].get("by_status", {}).get("failed", 0),
        "processes_exited": sum(1 for alive in result["processes_alive"].values() if not alive),
    }
    errors = sum(counts.values())
    return {
        "errors": errors,
        "by_kind": counts,
        "memory_flat": result["memory"]["flat"],
        "pass": errors == 0 and result["memory"]["flat"],
    }


def soak_summary_text(report: dict[str, Any]) -> str:
    soak, machine = report["soak"], report["machine"]
    memory, verdict = soak["memory"], soak["verdict"]
    lines = [
        "",
        f"Control-plane soak: {soak['duration_s']:g} s after {soak['warmup_s']:g} s warm-up, windows of "
        f"{soak['window_s']:g} s; {machine['cpu_count']} cores, {machine['server_workers']} uvicorn workers, "
        "1 Celery worker (pool of 1, beat embedded), local simulated engine",
        f"load: create {soak['load']['create']}, list {soak['load']['list']}; ws {soak['load']['ws']}; "
        f"the table started with {soak['table']['jobs']} finished jobs",
        "",
        soak_report.table_text(soak["windows"]),
        "latency ms (c = create, l = list; sent in the window); ws p99 = delivery lag; MiB = RSS at the window's end",
        "",
    ]
    for name in ("create", "list"):
        lat = soak[name]["latency"]
        lines.append(
            f"{name}: {soak[name]['requests']} requests, {soak[name]['throughput_rps']} ok/s, "
            f"{soak[name]['errors']} errors {soak[name]['errors_by_kind'] or ''}; "
            f"p50 {lat['p50_ms']}  p95 {lat['p95_ms']}  p99 {lat['p99_ms']}  max {lat['max_ms']} ms"
        )
    ws = soak["ws"]
    lines.append(
        f"ws: {ws['connected']}/{ws['clients']} connected, {ws['dropped']} dropped; {ws['events_published']} events "
        f"published; missing {ws['delivery']['missing']}, duplicates {ws['delivery']['duplicates']}; "
        f"lag p50 {ws['lag']['p50_ms']}  p99 {ws['lag']['p99_ms']}  max {ws['lag']['max_ms']} ms"
    )
    pub = ws["publisher"]
    lines.append(
        f"  publisher: behind schedule max {pub['behind_schedule_max_ms']} ms; ingest calls by events in them "
        f"{pub['ingests_by_batch_size']}; {pub['unsent']} never sent"
    )
    jobs = soak["jobs_submitted"]
    lines.append(f"submitted jobs at the end: {jobs['total']} ({jobs['by_status']})")
    lines.append(
        f"cores busy {soak['resources']['cores_busy_all_processes']} (server {soak['resources']['cores_server']}, "
        f"load generator {soak['resources']['cores_load_generator']}, other incl. Celery and Postgres "
        f"{soak['resources']['cores_other']})"
    )
    lines.append("")
    lines.append(
        f"memory (RSS slope from half the run, or from when a bounded history has filled; flat = |slope| <= "
        f"{memory['tolerance_mib_per_min']:g} MiB/min):"
    )
    for name, group in memory["groups"].items():
        judged = (
            f"from {group['from_s']:g} s {group['judged_growth_mib']:+} MiB, "
            f"slope {group['judged_slope_mib_per_min']:+} MiB/min: {'flat' if group['flat'] else 'NOT FLAT'}"
            if group["too_short"] is None
            else f"not judged: {group['too_short']}"
        )
        lines.append(
            f"  {name:<7} start {group['start_mib']} MiB, end {group['end_mib']} MiB, peak {group['peak_mib']} MiB; "
            + judged
        )
    kinds = ", ".join(f"{k} {v}" for k, v in verdict["by_kind"].items() if v) or "none"
    lines.append("")
    lines.append(
        f"verdict: {'PASS' if verdict['pass'] else 'FAIL'}: {verdict['errors']} errors ({kinds}); "
        f"memory {'flat' if verdict['memory_flat'] else 'NOT flat'}"
    )
    for name, found in soak["log_errors"].items():
        for line in found[:5]:
            lines.append(f"  {name} log: {line[:200]}")
    return "\n".join(lines)


# == the run ==================================================================================
async def run_benchmark(opts: Options) -> dict[str, Any]:
    admin_url = f"{opts.pg_url}/postgres"
    report: dict[str, Any] = {
        "machine": machine_info(opts),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items()},
        "targets_ms": TARGET_MS,
        "server": {"command": f"uvicorn webapp.asgi:application --workers {opts.workers}", **server_stack_info()},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "phases": {},
    }
    progress(f"setup: database {BENCH_DB}, migrations, tenants and {opts.clients} tokens")
    reset_database(admin_url, opts.db_connection_limit)
    purge_redis(opts.redis_url)
    sampler = Sampler(admin_url)
    sampler.start()
    env = bench_env(opts)
    try:
        await asyncio.to_thread(migrate, env)
        seeded = await asyncio.to_thread(run_django_step, env, "seed", {"tokens": opts.clients})
        with tempfile.TemporaryDirectory(prefix="bench-cp-") as log_dir:
            stack = Stack(
                opts=opts,
                env=env,
                harness_env={**env, "DATABASE_URL": f"{opts.pg_url}/{BENCH_DB}"},
                tokens=seeded["tokens"],
                sampler=sampler,
                log_dir=Path(log_dir),
            )
            run_started = time.monotonic()
            if opts.soak:
                report["soak"] = await phase_soak(stack)
            else:
                if "create" in opts.only:
                    report["phases"]["create"] = await phase_create(stack)
                if "list" in opts.only:
                    report["phases"].update(await phase_list(stack))
                if "ws" in opts.only:
                    report["phases"]["ws"] = await phase_ws(stack)
            report["during_run"] = sampler.between(run_started, time.monotonic())
    finally:
        progress("teardown: Redis keys" + ("" if opts.keep_db else f", database {BENCH_DB}"))
        sampler.stopped.set()
        sampler.join(timeout=5)
        report["redis_purge"] = purge_redis(opts.redis_url)
        if not opts.keep_db:
            drop_database(admin_url)
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return report


def server_stack_info() -> dict[str, Any]:
    """What uvicorn picks with its defaults here ("auto": uvloop and httptools when present)."""
    present = {}
    for module in ("uvloop", "httptools"):
        try:
            __import__(module)
            present[module] = True
        except ImportError:
            present[module] = False
    return {
        "loop": "uvloop" if present["uvloop"] else "asyncio",
        "http": "httptools" if present["httptools"] else "h11",
    }


# == the summary ==============================================================================
def verdicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: measured p99, target, target / measured, pass or fail."""
    rows = []
    labels = {
        "create": "job create p99",
        "list": "job list p99 (first page)",
        "list_queued": "job list p99 (?status=queued)",
    }
    for name, label in labels.items():
        phase = report["phases"].get(name)
        if phase:
            rows.append(_verdict(label, phase["latency"]["p99_ms"], TARGET_MS[name], phase["errors"]))
    ws = report["phases"].get("ws")
    if ws:
        faults = ws["delivery"]["missing"] + ws["delivery"]["duplicates"] + ws["clients"] - ws["connected"]
        rows.append(_verdict("ws delivery lag p99", ws["lag"]["p99_ms"], TARGET_MS["ws"], faults))
    return rows


def _verdict(label: str, measured: float | None, target: float, faults: int) -> dict[str, Any]:
    ratio = target / measured if measured else None
    ok = measured is not None and measured <= target and faults == 0
    return {"metric": label, "measured_ms": measured, "target_ms": target, "ratio": ratio, "faults": faults, "pass": ok}


def summary_text(report: dict[str, Any]) -> str:
    machine, phases, during = report["machine"], report["phases"], report.get("during_run", {})
    lines = [
        "",
        f"Control-plane benchmark: {machine['cpu_count']} cores (nproc {machine['nproc']}), "
        f"{machine['server_workers']} uvicorn workers ({report['server']['loop']}, {report['server']['http']}), "
        f"Python {machine['python']}",
        f"load average before {report['loadavg_before']}, after {report['loadavg_after']}; during the run "
        f"(1 min) mean {during.get('load1_mean')}, max {during.get('load1_max')}",
        "",
        f"{'metric':<32}{'measured':>12}{'target':>10}{'ratio':>8}{'faults':>8}  result",
    ]
    for row in verdicts(report):
        measured = f"{row['measured_ms']:.1f} ms" if row["measured_ms"] is not None else "-"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
        result = "PASS" if row["pass"] else "FAIL"
        lines.append(
            f"{row['metric']:<32}{measured:>12}{row['target_ms']:>7.0f} ms{ratio:>8}{row['faults']:>8}  {result}"
        )
    lines.append("ratio = target / measured (>= 1 meets it); faults = errors, or missing + duplicate + unconnected")
    for name in ("create", "list", "list_queued"):
        if name in phases:
            lines.extend(_http_detail(name, phases[name]))
    if "ws" in phases:
        lines.extend(_ws_detail(phases["ws"]))
    return "\n".join(lines)


def _resources_line(resources: dict[str, Any]) -> str:
    return (
        f"  cores busy {resources['cores_busy_all_processes']} (server {resources['cores_server']}, "
        f"load generator {resources['cores_load_generator']}, other incl. Postgres {resources['cores_other']}); "
        f"load1 max {resources.get('load1_max')}; new DB sessions {resources['db_sessions_opened']}, "
        f"DB connections max {resources.get('db_connections_max')}"
    )


def _pace(rate: float | str) -> str:
    return rate if isinstance(rate, str) else f"{rate:g} requests/s each"


def _http_detail(name: str, phase: dict[str, Any]) -> list[str]:
    lat = phase["latency"]
    windows = " ".join(f"{w['p99_ms']}" for w in phase["p99_by_window"])
    return [
        "",
        f"{name}: {phase['clients']} clients ({_pace(phase['rate_per_client'])}), {phase['requests']} requests, "
        f"{phase['throughput_rps']} ok/s, {phase['errors']} errors "
        f"{phase['errors_by_kind'] or ''}, {phase['mean_response_bytes']} B/response",
        f"  latency ms: p50 {lat['p50_ms']}  p95 {lat['p95_ms']}  p99 {lat['p99_ms']}  max {lat['max_ms']}  "
        f"mean {lat['mean_ms']}",
        f"  p99 per {WINDOW_S:.0f} s window: {windows}",
        _resources_line(phase["resources"]),
    ]


def _ws_detail(ws: dict[str, Any]) -> list[str]:
    lat, connect, pub = ws["lag"], ws["connect"], ws["publisher"]
    windows = " ".join(f"{w['p99_ms']}" for w in ws["p99_by_window"])
    return [
        "",
        f"ws: {ws['connected']}/{ws['clients']} connected on {ws['jobs']} jobs (connect p50 {connect['p50_ms']} "
        f"p99 {connect['p99_ms']} ms; errors {ws['client_errors'] or 'none'})",
        f"  messages: {ws['messages_received']} received of {ws['messages_expected']} expected; "
        f"missing {ws['delivery']['missing']}, duplicates {ws['delivery']['duplicates']}, "
        f"unexpected {ws['delivery']['unexpected']}; other frames {ws['other_frames'] or 'none'}",
        f"  delivery lag ms: p50 {lat['p50_ms']}  p95 {lat['p95_ms']}  p99 {lat['p99_ms']}  max {lat['max_ms']}",
        f"  p99 per {WINDOW_S:.0f} s window: {windows}",
        f"  publisher: {pub['events']} events; ingest+publish ms p50 {pub['ingest']['p50_ms']} "
        f"p99 {pub['ingest']['p99_ms']}; behind schedule max {pub['behind_schedule_max_ms']} ms; "
        f"ingest calls by events in them {pub['ingests_by_batch_size']}",
        _resources_line(ws["resources"]),
    ]


# == Django-side steps (run in child processes: ``_django <step> <json args>``) ===============
def step_seed(args: dict[str, Any]) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tenants.models import Role
    from tenants.services import api_token_create, membership_add, tenant_create

    user = get_user_model().objects.create_user(username="bench", password=None)
    bench = tenant_create(slug="bench", name="Benchmark", quota=BENCH_QUOTA)
    membership_add(tenant=bench, user=user, role=Role.MEMBER)
    for i in range(1, OTHER_TENANTS + 1):
        tenant_create(slug=f"bench-other-{i}", name=f"Other tenant {i}", quota=BENCH_QUOTA)
    # One token per client: the rate limiter counts per token, as it would count real callers.
    tokens = [api_token_create(tenant=bench, user=user, name=f"bench client {i}")[1] for i in range(args["tokens"])]
    return {"tokens": tokens}


def step_fill_table(args: dict[str, Any]) -> dict[str, Any]:
    """Exactly ``total`` jobs (the create phase's are dropped first), ``bench_jobs`` of them the
    benchmark tenant's, spread over 30 days; then VACUUM ANALYZE, as autovacuum would do after
    that many inserts (and might do in the middle of the measurement otherwise)."""
    from django.db import connection
    from django.db.models import Count
    from django.utils import timezone

    from tenants.models import Tenant
    from webapp import engine_gateway
    from webapp.jobs.models import Job

    with connection.cursor() as cursor:
        cursor.execute(f'TRUNCATE "{Job._meta.db_table}" CASCADE')
    bench = Tenant.objects.get(slug="bench")
    others = list(Tenant.objects.filter(slug__startswith="bench-other-").order_by("slug"))
    owners = [bench] * args["bench_jobs"] + [others[i % len(others)] for i in range(args["total"] - args["bench_jobs"])]
    rng = random.Random(20260101)
    resolved = engine_gateway.resolve_spec(BENCH_SPEC)
    now = timezone.now()
    # The soak wants history only: a queued or running row would be admitted or reconciled by
    # its Celery worker and compete with the jobs it submits.
    mix = {k: v for k, v in STATUS_MIX.items() if k in FINISHED} if args.get("finished_only") else STATUS_MIX
    jobs = [_table_job(i, tenant, rng, now, resolved, mix) for i, tenant in enumerate(owners)]
    Job.objects.bulk_create(jobs, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute(f'VACUUM ANALYZE "{Job._meta.db_table}"')
    by_status = dict(Job.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    bench_by_status = dict(
        Job.objects.filter(tenant=bench).values_list("status").annotate(n=Count("pk")).values_list("status", "n")
    )
    return {
        "jobs": Job.objects.count(),
        "by_status": by_status,
        "bench_jobs": args["bench_jobs"],
        "bench": bench_by_status,
    }


def _table_job(
    index: int, tenant: Any, rng: random.Random, now: Any, resolved: dict[str, Any], mix: dict[str, float]
) -> Any:
    from webapp.jobs.models import Job

    status = rng.choices(list(mix), weights=list(mix.values()))[0]
    total_steps = int(resolved["trainer"]["total_steps"])
    created = now - timedelta(seconds=rng.uniform(60, 30 * 86400))
    started = None if status == "queued" else created + timedelta(seconds=rng.uniform(5, 3600))
    ended = status in ("succeeded", "failed", "cancelled")
    finished = started + timedelta(seconds=rng.uniform(60, 7200)) if started is not None and ended else None
    reasons = {"queued": "capacity: waiting for 2 free GPUs", "failed": "system: worker lost"}
    return Job(
        tenant=tenant,
        name=f"bench {status} {index}",
        status=status,
        status_reason=reasons.get(status, ""),
        failure_class="system" if status == "failed" else "",
        spec=dict(BENCH_SPEC),
        resolved_spec=resolved,
        num_gpus=int(resolved["resources"]["num_gpus"]),
        device_type="h100",
        total_steps=total_steps,
        current_step=total_steps if status == "succeeded" else (rng.randint(0, total_steps) if started else 0),
        admitted_at=started if status == "running" else None,
        attempt=1 if started else 0,
        created_at=created,
        started_at=started,
        finished_at=finished,
    )


def step_ws_jobs(args: dict[str, Any]) -> dict[str, Any]:
    """Running jobs of the benchmark tenant with no events yet, for the sockets to watch. With
    ``hold_capacity`` false (the soak, whose Celery worker runs admission and the reconciler)
    they are not admitted: they take no GPUs from submitted jobs, and the reconciler does not
    re-dispatch them to an engine that never heard of them."""
    from django.utils import timezone

    from tenants.models import Tenant
    from webapp import engine_gateway
    from webapp.jobs.models import Job

    bench = Tenant.objects.get(slug="bench")
    resolved = engine_gateway.resolve_spec(BENCH_SPEC)
    now = timezone.now()
    jobs = [
        Job(
            tenant=bench,
            name=f"bench ws {i}",
            status="running",
            status_reason="running",
            spec=dict(BENCH_SPEC),
            resolved_spec=resolved,
            num_gpus=int(resolved["resources"]["num_gpus"]),
            device_type="h100",
            total_steps=1_000_000,  # never reached: no checkpoint or finish in the middle
            admitted_at=now if args.get("hold_capacity", True) else None,
            started_at=now,
            attempt=1,
        )
        for i in range(args["jobs"])
    ]
    Job.objects.bulk_create(jobs)
    return {"job_ids": [str(job.pk) for job in jobs]}


def step_publish(args: dict[str, Any]) -> dict[str, Any]:
    """One metrics event per job per second, each job at its own offset within the second,
    through the engine-event ingest (stored, then published on commit). On schedule, each event
    is ingested alone; a publisher that fell behind (a loaded machine) ingests every event already
    due in one call, as the event pump stores all it pulled since its cursor."""
    from webapp import engine_gateway
    from webapp.jobs.services.engine_events import engine_events_ingest

    job_ids: list[str] = args["job_ids"]
    engine_id = f"bench-{uuid.uuid4().hex[:8]}"
    due = [
        (args["start_at"] + tick + i / len(job_ids), tick, job_id)
        for tick in range(int(args["duration"]))
        for i, job_id in enumerate(job_ids)
    ]
    published: Counter[str] = Counter()
    ingest_ms: list[float] = []
    behind_ms: list[float] = [0.0]
    batch_sizes: Counter[int] = Counter()
    seq = 0
    # The soak stops publishing at its end even when ingest has fallen behind (an overloaded
    # machine), so that the run ends on time; what was never sent is reported, not waited for.
    deadline = args.get("deadline")
    unsent = 0
    k = 0
    while k < len(due):
        if deadline is not None and time.time() > deadline:
            unsent = len(due) - k
            break
        wait = due[k][0] - time.time()
        if wait > 0:
            time.sleep(wait)
        else:
            behind_ms.append(-wait * 1000)
        sent_at = time.time()
        end = k + 1
        while end < len(due) and due[end][0] <= sent_at:
            end += 1
        events = []
        for _, tick, job_id in due[k:end]:
            seq += 1
            events.append(
                engine_gateway.EngineEvent(
                    seq=seq,
                    pipeline_id=job_id,
                    kind=engine_gateway.EventKind.METRICS,
                    sim_time_s=float(tick),
                    data={"step": tick + 1, "metrics": {SENT_AT: sent_at, "reward/mean": 0.5 + 0.01 * tick}},
                )
            )
            published[job_id] += 1
        engine_events_ingest(engine_id=engine_id, events=events, next_cursor=seq)
        ingest_ms.append((time.time() - sent_at) * 1000)
        batch_sizes[len(events)] += 1
        k = end
    return {
        "published": dict(published),
        "events": seq,
        "ingest": latency_summary(ingest_ms),
        "behind_schedule_max_ms": round(max(behind_ms), 1),
        "ingests_by_batch_size": dict(sorted(batch_sizes.items())),
        "unsent": unsent,
    }


def step_job_outcomes(args: dict[str, Any]) -> dict[str, Any]:
    """Where the jobs the soak submitted (by their name) stand."""
    from django.db.models import Count

    from webapp.jobs.models import Job

    rows = Job.objects.filter(name=args["name"]).values_list("status").annotate(n=Count("pk"))
    by_status = {status: n for status, n in rows}
    return {"total": sum(by_status.values()), "by_status": by_status}


DJANGO_STEPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "job_outcomes": step_job_outcomes,
    "seed": step_seed,
    "fill_table": step_fill_table,
    "ws_jobs": step_ws_jobs,
    "publish": step_publish,
}


def django_main(step: str, raw_args: str) -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    print(RESULT_MARK + json.dumps(DJANGO_STEPS[step](json.loads(raw_args))), flush=True)


# == entry ====================================================================================
def raise_fd_limit() -> None:
    """500 sockets plus httpx's: lift the soft limit on open files to the hard one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["_django"]:
        django_main(argv[1], argv[2])
        return 0
    opts = parse_options(argv)
    if opts.soak:
        use_soak_namespace()
    raise_fd_limit()
    try:
        report = asyncio.run(run_benchmark(opts))
    except BenchError as exc:
        progress(f"failed: {exc}")
        return 2
    if opts.soak:
        print(soak_summary_text(report))
    else:
        report["verdicts"] = verdicts(report)
        print(summary_text(report))
    if opts.json_path:
        opts.json_path.write_text(json.dumps(report, indent=2) + "\n")
        progress(f"report: {opts.json_path}")
    return 1 if opts.soak and not report["soak"]["verdict"]["pass"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
