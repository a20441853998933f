#!/usr/bin/env python
"""The main job: start the whole stack on this machine, seed two tenants, submit their
pipelines through the REST API, print where to look, and stop everything on Ctrl-C.

Full mode (PostgreSQL and Redis reachable): uvicorn (HTTP + WebSocket), a Celery worker and
beat, and an embedded Ray cluster hosting the engine as a detached actor. Standalone mode
(either is missing): one process with SQLite, in-process tasks and an in-memory channel layer.
While it runs, both tenants keep submitting new jobs of mixed sizes and workloads (about
--jobs-per-minute, at most --max-in-flight unfinished per tenant, so some queue behind their
quota), so the cluster page always shows several tenants' jobs sharing it.

Options: --port, --smoke (exit once every submitted job is running; used to time start-up),
--real (train tiny models for real on this machine's cores instead of simulating full-size ones),
--jobs-per-minute / --max-in-flight / --max-jobs / --trickle-for / --no-trickle (the new jobs),
--debug (Django's debug pages on; off by default, as they list every URL of the service).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from devstack.demo import (
    DEMO_JOBS,
    MAX_IN_FLIGHT,
    REAL_DEMO_JOBS,
    new_jobs_trickle,
    submit,
    trickle_round,
    wait_running,
)
from devstack.launcher import (
    MIB,
    ROOT,
    LocalStack,
    RayHead,
    api_json,
    ensure_database,
    ray_env,
    reachable,
    real_engine_env,
)

RAY_PORT = 6390  # never Ray's default 6379: that is Redis's port
RAY_TEMP = Path("/tmp/jigsaw-demo-ray")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--ray-port", type=int, default=RAY_PORT, help="Ray's GCS port (never 6379: Redis)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--standalone", action="store_true", help="force standalone mode even if services are up")
    parser.add_argument(
        "--real", action="store_true", help="train tiny models for real on this machine's cores (ENGINE_MODE=real)"
    )
    new_jobs_args = parser.add_argument_group("new jobs while the demo runs")
    new_jobs_args.add_argument(
        "--jobs-per-minute", type=float, default=8.0, metavar="RATE", help="the pace of new jobs (default 8)"
    )
    new_jobs_args.add_argument(
        "--max-in-flight", type=int, default=4, metavar="N", help="unfinished jobs per tenant, at most (default 4)"
    )
    new_jobs_args.add_argument(
        "--max-jobs", type=int, default=None, metavar="N", help="stop after this many new jobs (default: never)"
    )
    new_jobs_args.add_argument(
        "--trickle-for", type=float, default=None, metavar="MINUTES", help="stop after this long (default: never)"
    )
    new_jobs_args.add_argument("--no-trickle", action="store_true", help="only the first jobs, no new ones")
    parser.add_argument(
        "--debug", action="store_true", help="Django's debug pages (tracebacks, every URL pattern) on this port"
    )
    args = parser.parse_args()
    if args.jobs_per_minute <= 0 or not 1 <= args.max_in_flight <= MAX_IN_FLIGHT:
        parser.error(
            f"--jobs-per-minute must be > 0 and --max-in-flight 1 to {MAX_IN_FLIGHT} (--no-trickle: no new jobs)"
        )
    started = time.monotonic()

    env = dict(os.environ)
    env.setdefault("JIGSAW_ENV", "development")
    # Off unless asked: a debug page lists every URL pattern and the settings to whoever asks.
    env["DEBUG"] = "1" if args.debug else "0"
    if args.real:
        env.update(real_engine_env(int(env.get("ENGINE_DEVICES_PER_NODE", min(os.cpu_count() or 2, 4)))))
    database_url = env.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jigsawrl")
    redis_url = env.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    standalone = args.standalone or not (reachable(database_url, 5432) and reachable(redis_url, 6379))
    if standalone:
        env.update(JIGSAW_STANDALONE="1", ENGINE_BACKEND="local")
    else:
        ensure_database(database_url)
        env.update(DATABASE_URL=database_url, REDIS_URL=redis_url, **ray_env(args.ray_port))

    log_dir = ROOT / "var" / "demo-logs"
    # Real jobs reserve the engine's cores from Ray (one per device); simulated ones none.
    ray_cpus = int(env["ENGINE_DEVICES_PER_NODE"]) if args.real else 2
    ray = None if standalone else RayHead(args.ray_port, ray_cpus, RAY_TEMP, 256 * MIB)
    stack = LocalStack(env, log_dir, web_port=args.port, ray=ray, beat_schedule=log_dir / "celerybeat-schedule")
    base = stack.base
    try:
        stack.manage("migrate", "--noinput")
        creds = json.loads(stack.manage("seed_demo", "--json"))
        stack.start()

        tokens = creds["tokens"]
        presets = {p["name"]: p["spec"] for p in api_json(base, "GET", "/api/v1/presets", tokens["acme"])["results"]}
        job_ids = []
        for tenant, preset, overrides in REAL_DEMO_JOBS if args.real else DEMO_JOBS:
            job = submit(base, tokens[tenant], {**presets[preset], **overrides})
            job_ids.append((tenant, job["id"], job["name"]))

        why = "--standalone" if args.standalone else "PostgreSQL or Redis not reachable"
        mode = (
            f"STANDALONE: SQLite, in-process tasks and channel layer ({why})"
            if standalone
            else f"full: PostgreSQL, Redis, Celery worker + beat, Ray head on 127.0.0.1:{args.ray_port}"
        )
        if args.real:
            mode += "; REAL tiny models on this machine's cores"
        if args.debug:
            mode += "; DEBUG on: Django's debug pages are served"
        print("=" * 78)
        print(f"JigsawRL demo is up in {time.monotonic() - started:.0f} s  [{mode}]")
        print(f"  dashboard : {base}/        API docs: {base}/api/v1/docs   admin: {base}/admin/")
        for user, password in creds["users"].items():
            print(f"  sign in   : {user} / {password}")
        for tenant, token in creds["tokens"].items():
            print(f"  API token : {tenant}: {token}   (shown once)")
        for tenant, job_id, name in job_ids:
            print(f"  submitted : [{tenant}] {name}  {base}/jobs/{job_id}")
        new_jobs = None
        if not (args.no_trickle or args.smoke):
            new_jobs = new_jobs_trickle(
                real=args.real,
                jobs_per_minute=args.jobs_per_minute,
                max_in_flight=args.max_in_flight,
                max_jobs=args.max_jobs,
                minutes=args.trickle_for,
            )
            first, *more = describe_trickle(args, base)
            print(f"  new jobs  : {first}")
            for line in more:
                print(f"              {line}")
        print(f"  logs      : {stack.log_dir}/")
        print("Ctrl-C stops everything this demo started.")
        print("=" * 78, flush=True)

        if args.smoke:
            wait_running(base, tokens, job_ids, stack.processes.check_alive)
            print(f"smoke: all jobs reached running or later in {time.monotonic() - started:.0f} s", flush=True)
            return 0
        while True:
            stack.processes.check_alive()
            if new_jobs is not None and not trickle_round(new_jobs, base, tokens, presets):
                print(f"new jobs: {new_jobs.handed_out} submitted, no more (--max-jobs / --trickle-for)", flush=True)
                new_jobs = None
            time.sleep(1)
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
        return 0
    finally:
        stack.stop()


def describe_trickle(args: argparse.Namespace, base: str) -> list[str]:
    limits = [f"{args.max_jobs} in all"] if args.max_jobs is not None else []
    limits += [f"for {args.trickle_for:g} min"] if args.trickle_for is not None else []
    until = " or ".join(limits) or "until Ctrl-C"
    return [
        f"about {args.jobs_per_minute:g} a minute keep arriving from both tenants, {until}",
        f"(at most {args.max_in_flight} unfinished per tenant, so some queue): watch {base}/cluster and /jobs",
        "--jobs-per-minute, --max-in-flight, --max-jobs, --trickle-for change this; --no-trickle: none",
    ]


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main())
