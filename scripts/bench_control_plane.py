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
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from devstack.bench.config import (
    BENCH_DB,
    PHASES,
    SOAK_CREATE_RATE,
    SOAK_RSS_TOLERANCE_MIB_PER_MIN,
    SOAK_WINDOW_S,
    WARMUP_S,
    WS_CLIENTS_PER_JOB,
    BenchError,
    Options,
    progress,
)
from devstack.bench.phases import run_benchmark
from devstack.bench.report import soak_summary_text, summary_text, verdicts
from devstack.launcher import StackError


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


def raise_fd_limit() -> None:
    """500 sockets plus httpx's: lift the soft limit on open files to the hard one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: Sequence[str]) -> int:
    opts = parse_options(argv)
    raise_fd_limit()
    try:
        report = asyncio.run(run_benchmark(opts))
    except (BenchError, StackError) as exc:
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
