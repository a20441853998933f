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
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlparse

from jigsaw_client.trickle import UNFINISHED_STATUSES, Trickle, TrickleJob

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
RAY_PORT = 6390  # never Ray's default 6379: that is Redis's port
RAY_TEMP = "/tmp/jigsaw-demo-ray"

# --real: the same kinds of job, tiny, trained for real on this machine's cores.
REAL_DEMO_JOBS = [
    ("acme", "math-grpo", {"trainer": {"total_steps": 40}}),
    ("globex", "self-refine", {"trainer": {"total_steps": 30}}),
    ("acme", "retrieval-qa", {"trainer": {"total_steps": 20}}),
]

DEMO_JOBS = [
    ("acme", "math-grpo", {"trainer": {"total_steps": 30}}),
    ("acme", "retrieval-qa", {"data": {"train_batch_size": 32}, "trainer": {"total_steps": 15}}),
    ("globex", "self-refine", {"data": {"train_batch_size": 16}, "trainer": {"total_steps": 8}}),
    ("globex", "math-grpo", {"name": "gsm8k-grpo-large", "model": "qwen3-4b", "resources": {"num_gpus": 4}}),
]

MAX_IN_FLIGHT = 200  # a tenant's unfinished jobs are counted from one page of the jobs list

# The jobs that keep arriving while the demo runs: the presets and the pipelines of
# examples/mix-small.yaml, mostly 1 or 2 GPUs and one of 4 per tenant, 15-40 s each at the
# demo's engine speed. A tenant may hold 6 of the 8 GPUs and run 3 jobs, so some wait.
TRICKLE_JOBS = [
    TrickleJob("acme", "math-grpo", {"trainer": {"total_steps": 30}}),
    TrickleJob("acme", "math-grpo", {"name": "gsm8k-grpo-1gpu", "resources": {"num_gpus": 1}}),
    TrickleJob(
        "acme",
        "retrieval-qa",
        {"name": "search-llama-8b", "resources": {"num_gpus": 4}, "trainer": {"total_steps": 10}},
    ),
    TrickleJob("acme", "retrieval-qa", {"data": {"train_batch_size": 32}, "trainer": {"total_steps": 10}}),
    TrickleJob("globex", "math-grpo", {"name": "gsm8k-qwen3-4b", "model": "qwen3-4b", "trainer": {"total_steps": 20}}),
    TrickleJob("globex", "self-refine", {"data": {"train_batch_size": 16}, "trainer": {"total_steps": 4}}),
    TrickleJob("globex", "math-grpo", {"name": "math-qwen3-0.6b", "workload": "math"}),
    TrickleJob("globex", "retrieval-qa", {"data": {"train_batch_size": 32}, "trainer": {"total_steps": 10}}),
]
REAL_TRICKLE_JOBS = [
    TrickleJob("acme", "math-grpo", {"trainer": {"total_steps": 20}}),
    TrickleJob("acme", "retrieval-qa", {"trainer": {"total_steps": 15}}),
    TrickleJob("globex", "self-refine", {"trainer": {"total_steps": 15}}),
    TrickleJob("globex", "math-grpo", {"trainer": {"total_steps": 10}}),
]


def reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def ensure_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/") or "jigsawrl"
    admin_url = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


class Stack:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.log_dir = ROOT / "var" / "demo-logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def run(self, *cmd: str) -> str:
        return subprocess.run(cmd, cwd=ROOT, env=self.env, check=True, capture_output=True, text=True).stdout

    def start(self, name: str, *cmd: str) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 (kept open for the child)
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append((name, proc))

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.log_dir / (name + '.log')}")

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def http_json(method: str, url: str, token: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    if method == "POST":
        req.add_header("Idempotency-Key", str(uuid.uuid4()))
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def wait_port(port: int, stack: Stack, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not reachable(f"tcp://127.0.0.1:{port}", port):
        stack.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listens on port {port} after {timeout_s}s")
        time.sleep(0.5)


def wait_healthy(base: str, stack: Stack, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        stack.check_alive()
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=20) as resp:
                if resp.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            last = exc.read().decode()[:300]
        except OSError as exc:
            last = str(exc)
        time.sleep(1)
    raise RuntimeError(f"the stack did not become healthy in {timeout_s}s: {last}")


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
        env.update(ENGINE_MODE="real", ENGINE_DEVICE_TYPE="cpu", ENGINE_NUM_NODES="1")
        env.setdefault("ENGINE_DEVICES_PER_NODE", str(min(os.cpu_count() or 2, 4)))
    database_url = env.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jigsawrl")
    redis_url = env.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    standalone = args.standalone or not (reachable(database_url, 5432) and reachable(redis_url, 6379))
    if standalone:
        env.update(JIGSAW_STANDALONE="1", ENGINE_BACKEND="local")
    else:
        ensure_database(database_url)
        env.update(
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            ENGINE_BACKEND="ray",
            RAY_ADDRESS=f"127.0.0.1:{args.ray_port}",
        )
        # Ray's token auth: the head and every process that joins it share one secret.
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))

    stack = Stack(env)
    base = f"http://127.0.0.1:{args.port}"
    try:
        py = sys.executable
        stack.run(py, "manage.py", "migrate", "--noinput")
        creds = json.loads(stack.run(py, "manage.py", "seed_demo", "--json"))
        if not standalone:
            if reachable(f"tcp://127.0.0.1:{args.ray_port}", args.ray_port):
                raise RuntimeError(f"port {args.ray_port} is taken (an earlier Ray head?); stop it and retry")
            # Real jobs reserve the engine's cores from Ray (one per device); simulated ones none.
            ray_cpus = env["ENGINE_DEVICES_PER_NODE"] if args.real else "2"
            # --block keeps the head in this demo's process group, so stopping the demo stops
            # exactly this Ray cluster (never `ray stop`, which ends every Ray on the machine).
            stack.start(
                "ray-head", str(VENV_BIN / "ray"), "start", "--head", "--block", f"--port={args.ray_port}",
                f"--num-cpus={ray_cpus}", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
                "--disable-usage-stats", f"--temp-dir={RAY_TEMP}", "--object-store-memory=268435456",
            )  # fmt: skip
            wait_port(args.ray_port, stack)
            celery = str(VENV_BIN / "celery")
            stack.start("worker", celery, "-A", "webapp.celery_app", "worker", "--loglevel=INFO", "--concurrency=2")
            stack.start("beat", celery, "-A", "webapp.celery_app", "beat", "--loglevel=INFO",
                        "--schedule", str(stack.log_dir / "celerybeat-schedule"))  # fmt: skip
        stack.start("web", py, "manage.py", "serve", "--port", str(args.port))
        wait_healthy(base, stack)

        tokens = creds["tokens"]
        presets = {p["name"]: p["spec"] for p in http_json("GET", f"{base}/api/v1/presets", tokens["acme"])["results"]}
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
        new_jobs = None if args.no_trickle or args.smoke else new_jobs_trickle(args)
        if new_jobs is not None:
            first, *more = describe_trickle(args, base)
            print(f"  new jobs  : {first}")
            for line in more:
                print(f"              {line}")
        print(f"  logs      : {stack.log_dir}/")
        print("Ctrl-C stops everything this demo started.")
        print("=" * 78, flush=True)

        if args.smoke:
            wait_running(base, tokens, job_ids, stack)
            print(f"smoke: all jobs reached running or later in {time.monotonic() - started:.0f} s", flush=True)
            return 0
        while True:
            stack.check_alive()
            if new_jobs is not None and not trickle_round(new_jobs, base, tokens, presets):
                print(f"new jobs: {new_jobs.handed_out} submitted, no more (--max-jobs / --trickle-for)", flush=True)
                new_jobs = None
            time.sleep(1)
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
        return 0
    finally:
        stack.stop()


def submit(base: str, token: str, spec: dict, name: str = "") -> dict:
    return http_json("POST", f"{base}/api/v1/jobs", token, {"name": name or spec["name"], "spec": spec})


def new_jobs_trickle(args: argparse.Namespace) -> Trickle:
    now = time.monotonic()
    return Trickle(
        REAL_TRICKLE_JOBS if args.real else TRICKLE_JOBS,
        jobs_per_minute=args.jobs_per_minute,
        start=now + 60.0 / args.jobs_per_minute,  # the first jobs were just submitted
        max_in_flight=args.max_in_flight,
        max_jobs=args.max_jobs,
        stop_at=None if args.trickle_for is None else now + 60.0 * args.trickle_for,
    )


def describe_trickle(args: argparse.Namespace, base: str) -> list[str]:
    limits = [f"{args.max_jobs} in all"] if args.max_jobs is not None else []
    limits += [f"for {args.trickle_for:g} min"] if args.trickle_for is not None else []
    until = " or ".join(limits) or "until Ctrl-C"
    return [
        f"about {args.jobs_per_minute:g} a minute keep arriving from both tenants, {until}",
        f"(at most {args.max_in_flight} unfinished per tenant, so some queue): watch {base}/cluster and /jobs",
        "--jobs-per-minute, --max-in-flight, --max-jobs, --trickle-for change this; --no-trickle: none",
    ]


def trickle_round(trickle: Trickle, base: str, tokens: dict[str, str], presets: dict[str, dict]) -> bool:
    """Submit what is due, as the tenants' clients would (the REST API, their own tokens).
    False once the trickle is over."""
    now = time.monotonic()
    if trickle.finished(now):
        return False
    if not trickle.due(now):
        return True
    try:
        in_flight = {tenant: unfinished_jobs(base, tokens[tenant]) for tenant in trickle.tenants}
    except OSError as exc:  # the stack's own health is check_alive's business
        print(f"new jobs: could not count unfinished jobs ({exc}); trying again", file=sys.stderr, flush=True)
        trickle.defer(now)
        return True
    while (job := trickle.take(now, in_flight)) is not None:
        spec = {**presets[job.preset], **job.overrides}
        name = f"{spec['name']}-{trickle.handed_out}"
        try:
            submit(base, tokens[job.tenant], spec, name)
        except urllib.error.HTTPError as exc:  # e.g. the tenant's queue or budget is full: skip this one
            print(f"new jobs: [{job.tenant}] {name} refused: {exc.code} {exc.read()[:300]!r}", file=sys.stderr)
        except OSError as exc:
            print(f"new jobs: [{job.tenant}] {name} not submitted: {exc}", file=sys.stderr)
        in_flight[job.tenant] += 1
    return True


def unfinished_jobs(base: str, token: str) -> int:
    query = f"status={','.join(UNFINISHED_STATUSES)}&page_size={MAX_IN_FLIGHT}"
    return len(http_json("GET", f"{base}/api/v1/jobs?{query}", token)["results"])


def wait_running(base: str, tokens: dict[str, str], job_ids: list[tuple[str, str, str]], stack: Stack) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        stack.check_alive()
        states = [http_json("GET", f"{base}/api/v1/jobs/{jid}", tokens[t])["status"] for t, jid, _ in job_ids]
        if "failed" in states:
            raise RuntimeError(f"a demo job failed: {states}")
        if sum(s in ("running", "succeeded") for s in states) >= 2:
            return
        time.sleep(1)
    raise RuntimeError(f"jobs did not start: {states}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main())
