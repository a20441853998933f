"""The whole control plane and engine as separate processes, as in production: uvicorn,
a Celery worker, beat and a Ray head hosting the engine's actor, on private Postgres and Redis.
Any one of them can be killed and started again."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.faults.private_services import PrivatePostgres, PrivateRedis, free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DATABASE = "jigsaw_faults"


class FaultStack:
    def __init__(self, *, engine_speed: float, log_dir: Path, real: bool = False, engine_failpoints: str = "") -> None:
        """``real``: the engine trains tiny models for real on this machine's cores (two
        "devices"), checkpointing every step; ``engine_failpoints``: the engine's failpoints."""
        # Short: Ray's socket paths must stay under the kernel's length limit.
        self.tmp = Path(tempfile.mkdtemp(prefix="jf-", dir="/tmp"))
        self.tmp.chmod(0o755)  # the postgres user must reach its folder inside
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.postgres = PrivatePostgres(self.tmp)
        self.redis = PrivateRedis(self.tmp)
        self.web_port = free_port()
        self.ray_port = free_port()
        self.base = f"http://127.0.0.1:{self.web_port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        # Like compose's `restart: unless-stopped`: a process that exits on its own is started
        # again (a Celery worker can die on a broker connection lost mid-restore, say).
        self.supervisor_restarts: list[str] = []
        self._down_on_purpose: set[str] = set()
        self._lock = threading.Lock()
        self._supervising = threading.Event()
        self.tokens: dict[str, str] = {}
        self.env = dict(os.environ)
        self.env.update(
            JIGSAW_ENV="development",
            DATABASE_URL=self.postgres.url(DATABASE),
            REDIS_URL=self.redis.url(0),
            ENGINE_BACKEND="ray",
            RAY_ADDRESS=f"127.0.0.1:{self.ray_port}",
            ENGINE_SPEED=str(engine_speed),
            DB_POOL_MIN="1",
            # A lost dispatch or a restarted engine is noticed within seconds, not half a minute.
            RECONCILE_EVERY_S="2",
            RECONCILE_DISPATCH_GRACE_S="6",
            API_RATE_PER_CALLER="100000/min",
            PYTHONUNBUFFERED="1",
            # Ray's token auth, as the demo runs it: the head and every process that joins share it.
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=secrets.token_hex(32),
        )
        self.env.pop("JIGSAW_STANDALONE", None)
        self.env.pop("JIGSAW_FAILPOINTS", None)
        if real:
            self.env.update(
                ENGINE_MODE="real",
                ENGINE_DEVICE_TYPE="cpu",
                ENGINE_NUM_NODES="1",
                ENGINE_DEVICES_PER_NODE="2",
                ENGINE_REAL_CHECKPOINT_DIR=str(self.tmp / "checkpoints"),
            )
        self.engine_failpoints = engine_failpoints

    # -- start and stop ----------------------------------------------------------------------
    def start(self) -> None:
        self.postgres.start()
        self.postgres.create_database(DATABASE)
        self.redis.start()
        self._manage("migrate", "--noinput")
        creds = json.loads(self._manage("seed_demo", "--json"))
        self.tokens = creds["tokens"]
        # Ray's workers (the engine's actor among them) inherit the head's environment.
        self.start_process(
            "ray-head", {"JIGSAW_FAILPOINTS": self.engine_failpoints} if self.engine_failpoints else None
        )
        wait_port(self.ray_port, 60, "the Ray head")
        for name in ("worker", "beat", "web"):
            self.start_process(name)
        self.wait_healthy()
        self._supervising.set()
        threading.Thread(target=self._supervise, name="supervisor", daemon=True).start()

    def _supervise(self) -> None:
        while self._supervising.is_set():
            with self._lock:
                for name, proc in list(self.procs.items()):
                    if name not in self._down_on_purpose and proc.poll() is not None:
                        self.supervisor_restarts.append(name)
                        self._start(name, None)
            time.sleep(0.5)

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        )
        return done.stdout

    def _command(self, name: str) -> list[str]:
        celery = [str(BIN / "celery"), "-A", "webapp.celery_app"]
        ray_head = [str(BIN / "ray"), "start", "--head", "--block", f"--port={self.ray_port}", "--num-cpus=2"]
        ray_head += ["--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"]
        ray_head += [f"--temp-dir={self.tmp / 'ray'}", "--object-store-memory=134217728"]
        return {
            "ray-head": ray_head,
            "worker": [*celery, "worker", "--loglevel=INFO", "--concurrency=2", "--without-mingle", "--without-gossip"],
            "beat": [*celery, "beat", "--loglevel=INFO", "--schedule", str(self.tmp / "beat-schedule")],
            "web": [sys.executable, "manage.py", "serve", "--port", str(self.web_port)],
        }[name]

    def start_process(self, name: str, extra_env: dict[str, str] | None = None) -> None:
        with self._lock:
            self._down_on_purpose.discard(name)
            self._start(name, extra_env)

    def _start(self, name: str, extra_env: dict[str, str] | None) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (kept open for the child)
        self.procs[name] = subprocess.Popen(
            self._command(name),
            cwd=ROOT,
            env={**self.env, **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill_process(self, name: str) -> None:
        """SIGKILL to the process group: no clean shutdown, no acknowledgement, no goodbye."""
        with self._lock:
            self._down_on_purpose.add(name)
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def stop(self) -> None:
        self._supervising.clear()
        with self._lock:
            self._down_on_purpose.update(self.procs)
        for name in ("web", "beat", "worker", "ray-head"):
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.redis.kill()
        with contextlib.suppress(subprocess.CalledProcessError):
            self.postgres.stop("immediate")

    def wait_healthy(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.log_dir / (name + '.log')}")
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=10) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = exc.read().decode()[:300]
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise RuntimeError(f"the stack did not become healthy in {timeout_s:.0f}s: {last}")

    # -- the REST API, as a user reaches it --------------------------------------------------
    def api(self, method: str, path: str, tenant: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.tokens[tenant]}")
        req.add_header("Content-Type", "application/json")
        if method == "POST":
            req.add_header("Idempotency-Key", str(uuid.uuid4()))
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def api_retrying(self, method: str, path: str, tenant: str, timeout_s: float = 60) -> Any:
        """GET through an outage: what a dashboard's polling does."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.api(method, path, tenant)
            except (urllib.error.HTTPError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
