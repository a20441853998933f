"""Start the stack's processes on this machine, wait until they serve, and stop them.

The whole stack is a Ray head hosting the engine's actor, a Celery worker and beat, and the
web server (``manage.py serve``: uvicorn, HTTP and WebSocket), as a deployment runs them. The
demo, the fault suite and the control-plane benchmark all start them here: :class:`LocalStack`
for the whole of it, :class:`Processes` and the command builders for a part (the benchmark
runs N uvicorn workers and a Celery worker without Ray).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MIB = 1024 * 1024


class StackError(RuntimeError):
    """A process of the stack exited, or did not come up in time."""


# -- ports -------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int, host: str = "127.0.0.1", timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def reachable(url: str, default_port: int) -> bool:
    """Whether the server of a URL (``postgres://``, ``redis://``) accepts connections."""
    parsed = urlparse(url)
    return listening(parsed.port or default_port, parsed.hostname or "127.0.0.1")


def wait_port(port: int, what: str, timeout_s: float = 60, alive: Callable[[], None] | None = None) -> None:
    """Until something listens on ``port``; ``alive`` raises if the process meant to is gone."""
    deadline = time.monotonic() + timeout_s
    while not listening(port, timeout_s=0.5):
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise StackError(f"{what} did not listen on port {port} within {timeout_s:.0f}s")
        time.sleep(0.2)


# -- environment and databases ----------------------------------------------------------------
def ray_env(port: int) -> dict[str, str]:
    """The engine on a Ray head at ``port``. Ray's token auth: the head and every process that
    joins it share one secret."""
    return {
        "ENGINE_BACKEND": "ray",
        "RAY_ADDRESS": f"127.0.0.1:{port}",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
    }


def real_engine_env(devices: int) -> dict[str, str]:
    """The engine trains tiny models for real on this machine's cores, one core a device."""
    return {
        "ENGINE_MODE": "real",
        "ENGINE_DEVICE_TYPE": "cpu",
        "ENGINE_NUM_NODES": "1",
        "ENGINE_DEVICES_PER_NODE": str(devices),
    }


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database of ``url`` unless it exists."""
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/") or "jigsawrl"
    admin_url = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


# -- commands -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RayHead:
    port: int
    cpus: int
    """Real jobs reserve the engine's cores from Ray (one per device); simulated ones none."""
    temp_dir: Path
    """Short: Ray's socket paths must stay under the kernel's length limit."""
    object_store_bytes: int

    def command(self) -> list[str]:
        # --block keeps `ray start` running as the leader of its daemons' process group, so
        # stopping the group stops exactly this Ray cluster (never `ray stop`, which ends every
        # Ray on the machine).
        return [
            str(BIN / "ray"), "start", "--head", "--block", f"--port={self.port}", f"--num-cpus={self.cpus}",
            "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}", f"--object-store-memory={self.object_store_bytes}",
        ]  # fmt: skip


def celery_command(*args: str) -> list[str]:
    return [str(BIN / "celery"), "-A", "webapp.celery_app", *args]


def serve_command(port: int) -> list[str]:
    """The web server as the images run it: one uvicorn process (and, standalone, the rest)."""
    return [sys.executable, "manage.py", "serve", "--port", str(port)]


def uvicorn_command(port: int, workers: int, keep_alive_s: int) -> list[str]:
    """uvicorn with ``workers`` processes under a supervisor, quiet."""
    return [
        sys.executable, "-m", "uvicorn", "webapp.asgi:application", "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers),
        "--lifespan", "off",  # Django answers HTTP and WebSocket only
        "--no-access-log", "--log-level", "warning", "--timeout-graceful-shutdown", "5",
        "--timeout-keep-alive", str(keep_alive_s),
    ]  # fmt: skip


def manage(env: dict[str, str], *args: str) -> str:
    """``manage.py <args>`` under ``env``; its standard output. Fails with its error output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise StackError(f"manage.py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


# -- logs -------------------------------------------------------------------------------------
def log_tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def log_excerpt(path: Path, chars: int = 3000) -> str:
    """The first and the last ``chars`` of a log: the first failure and how it ended."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return text if len(text) <= 2 * chars else f"{text[:chars]}\n[...]\n{text[-chars:]}"


# -- processes ----------------------------------------------------------------------------------
class Processes:
    """Named child processes, each in a session of its own (a signal to its group reaches what
    it started: uvicorn's workers, Celery's pool, Ray's daemons), each writing ``<name>.log``.

    Once :meth:`supervise` runs, a process that exits on its own is started again with its
    command, as compose's ``restart: unless-stopped`` would; one killed or stopped here is not."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, append_logs: bool = False) -> None:
        self.env = env
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.append_logs = append_logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.commands: dict[str, list[str]] = {}
        self.restarts: list[str] = []
        """Processes that exited on their own and were started again by :meth:`supervise`."""
        self._down_on_purpose: set[str] = set()
        self._lock = threading.Lock()
        self._supervising = threading.Event()

    def log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self, name: str, command: Sequence[str] | None = None, extra_env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``name`` (again: with the command it last ran) under the stack's env and ``extra_env``."""
        with self._lock:
            if command is not None:
                self.commands[name] = list(command)
            self._down_on_purpose.discard(name)
            return self._start(name, extra_env)

    def _start(self, name: str, extra_env: dict[str, str] | None) -> subprocess.Popen[bytes]:
        with self.log(name).open("ab" if self.append_logs else "wb") as log:
            proc = subprocess.Popen(
                self.commands[name],
                cwd=ROOT,
                env={**self.env, **(extra_env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def check_alive(self) -> None:
        """Raise if a process exited that nobody stopped."""
        for name, proc in list(self.procs.items()):
            if name not in self._down_on_purpose and proc.poll() is not None:
                raise StackError(f"{name} exited with {proc.returncode}; see {self.log(name)}")

    def kill(self, name: str) -> None:
        """SIGKILL to the process group: no clean shutdown, no acknowledgement, no goodbye."""
        with self._lock:
            self._down_on_purpose.add(name)
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def stop(self, names: Iterable[str] | None = None, *, timeout_s: float = 15, leader_only: bool = False) -> None:
        """SIGTERM in the reverse order of their start, SIGKILL to whatever is left after
        ``timeout_s``. ``leader_only``: the signal to the group's leader alone, which stops
        its children in its own time (a Celery worker lets its running task finish)."""
        chosen = list(self.procs) if names is None else list(names)
        if names is None:
            self._supervising.clear()
        with self._lock:
            self._down_on_purpose.update(chosen)
        procs = [self.procs[name] for name in reversed(chosen) if name in self.procs]
        for proc in procs:
            if proc.poll() is None:
                if leader_only:
                    proc.send_signal(signal.SIGTERM)
                else:
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

    def supervise(self, interval_s: float = 0.5) -> None:
        """Start a thread that restarts what exits on its own, until :meth:`stop` of them all."""
        self._supervising.set()
        threading.Thread(target=self._supervise, args=(interval_s,), name="supervisor", daemon=True).start()

    def _supervise(self, interval_s: float) -> None:
        while self._supervising.is_set():
            with self._lock:
                for name, proc in list(self.procs.items()):
                    if name not in self._down_on_purpose and proc.poll() is not None:
                        self.restarts.append(name)
                        self._start(name, None)
            time.sleep(interval_s)


# -- the whole stack ------------------------------------------------------------------------------
class LocalStack:
    """A Ray head, a Celery worker and beat, and the web server; or, with ``ray`` None, the web
    server alone (standalone mode: tasks in-process, an in-memory channel layer)."""

    def __init__(
        self,
        env: dict[str, str],
        log_dir: Path,
        *,
        web_port: int,
        ray: RayHead | None,
        beat_schedule: Path,
        worker_args: Sequence[str] = (),
        append_logs: bool = False,
    ) -> None:
        self.processes = Processes(env, log_dir, append_logs=append_logs)
        self.web_port = web_port
        self.ray = ray
        self.beat_schedule = beat_schedule
        self.worker_args = tuple(worker_args)
        self.base = f"http://127.0.0.1:{web_port}"

    @property
    def env(self) -> dict[str, str]:
        return self.processes.env

    @property
    def log_dir(self) -> Path:
        return self.processes.log_dir

    def manage(self, *args: str) -> str:
        return manage(self.env, *args)

    def start(self, ray_env: dict[str, str] | None = None, healthy_timeout_s: float = 120) -> None:
        """Every process, each once the one it needs is up; ``ray_env``: for the head alone (Ray's
        workers, the engine's actor among them, inherit its environment)."""
        if self.ray is not None:
            if listening(self.ray.port):
                raise StackError(f"port {self.ray.port} is taken (an earlier Ray head?); stop it and retry")
            self.processes.start("ray-head", self.ray.command(), ray_env)
            wait_port(self.ray.port, "the Ray head", alive=self.processes.check_alive)
            worker = ["worker", "--loglevel=INFO", "--concurrency=2", *self.worker_args]
            self.processes.start("worker", celery_command(*worker))
            beat = ["beat", "--loglevel=INFO", "--schedule", str(self.beat_schedule)]
            self.processes.start("beat", celery_command(*beat))
        self.processes.start("web", serve_command(self.web_port))
        self.wait_healthy(healthy_timeout_s)

    def wait_healthy(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            self.processes.check_alive()
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=10) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = exc.read().decode()[:300]
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise StackError(f"the stack did not become healthy in {timeout_s:.0f}s: {last}")

    def stop(self, timeout_s: float = 15) -> None:
        self.processes.stop(timeout_s=timeout_s)


# -- the REST API, as a user reaches it -------------------------------------------------------------
def api_json(base: str, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> Any:
    """One call of the REST API with a tenant's token; a POST carries a fresh Idempotency-Key."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    if method == "POST":
        req.add_header("Idempotency-Key", str(uuid.uuid4()))
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())
