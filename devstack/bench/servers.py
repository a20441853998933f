"""The benchmark's servers, started through :mod:`devstack.launcher`: a fresh uvicorn with N
workers for each measured load, and for the soak a Celery worker with beat embedded."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from devstack.bench.config import KEEP_ALIVE_S, BenchError, Options
from devstack.bench.resources import PhaseMeter, Sampler, process_tree
from devstack.launcher import Processes, celery_command, free_port, log_excerpt, log_tail, uvicorn_command

WORKER = "celery-worker"


@dataclass
class Server:
    name: str
    pid: int
    base_url: str
    log_path: Path


@dataclass
class Stack:
    """What every phase needs. Each measured load gets a fresh server, so that what one load
    leaves behind (open connections, warm caches) is not charged to the next."""

    opts: Options
    env: dict[str, str]  # the server's and the publisher's (the capped role)
    harness_env: dict[str, str]  # the benchmark's own table fills (the admin role: never refused)
    tokens: list[str]
    sampler: Sampler
    processes: Processes
    server_logs: list[str] = field(default_factory=list)

    @property
    def log_dir(self) -> Path:
        return self.processes.log_dir

    def start_server(self) -> Server:
        port = free_port()
        name = f"uvicorn-{port}"
        proc = self.processes.start(name, uvicorn_command(port, self.opts.workers, KEEP_ALIVE_S))
        return Server(name, proc.pid, f"http://127.0.0.1:{port}", self.processes.log(name))

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Server]:
        server = self.start_server()
        try:
            await self.wait_ready(server)
            yield server
        finally:
            # uvicorn's supervisor stops its workers
            self.processes.stop([server.name], timeout_s=20, leader_only=True)
            self.server_logs.append(log_excerpt(server.log_path))

    async def wait_ready(self, server: Server, timeout_s: float = 90.0) -> None:
        """Ready when GET /api/v1/me answers 200 on fresh connections twice per worker in a row
        (a worker still importing Django does not accept, so the others answer meanwhile)."""
        deadline = time.monotonic() + timeout_s
        streak = 0
        while streak < 2 * self.opts.workers:
            if not self.processes.alive(server.name):
                code = self.processes.procs[server.name].returncode
                raise BenchError(f"the server exited ({code}):\n{log_tail(server.log_path)}")
            if time.monotonic() > deadline:
                raise BenchError(f"the server was not ready within {timeout_s:.0f} s:\n{log_tail(server.log_path)}")
            try:
                async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
                    response = await client.get("/api/v1/me", headers={"Authorization": f"Bearer {self.tokens[0]}"})
                streak = streak + 1 if response.status_code == 200 else 0
            except httpx.HTTPError:
                streak = 0
            if streak == 0:
                await asyncio.sleep(0.3)

    def meter(self, server: Server) -> PhaseMeter:
        """Started now; ``result()`` at the end of the load."""
        return PhaseMeter(server.pid, self.sampler).begin()

    def start_worker(self) -> int:
        """A Celery worker with beat embedded, on the run's queue; its pid. One pool process:
        with the local engine every process hosts its own engine, and dispatch, the event pump
        and the reconciler must all see the same one (the Ray backend shares one engine between
        any number)."""
        prefix = self.opts.prefix
        command = celery_command(
            "worker", "--beat", "--schedule", str(self.log_dir / "celerybeat-schedule"), "--concurrency", "1",
            "--queues", prefix, "--hostname", f"{prefix}@%h",
            "--without-gossip",  # other workers may share this Redis: no chatter with them
            "--without-mingle", "--loglevel", "WARNING",
        )  # fmt: skip
        return self.processes.start(WORKER, command).pid

    async def wait_worker_ready(self, timeout_s: float = 90.0) -> None:
        """Ready when its pool process and beat have been forked (main + beat + pool child)."""
        deadline = time.monotonic() + timeout_s
        log = self.processes.log(WORKER)
        while len(process_tree(self.processes.procs[WORKER].pid)) < 3:
            if not self.processes.alive(WORKER):
                code = self.processes.procs[WORKER].returncode
                raise BenchError(f"the Celery worker exited ({code}):\n{log_tail(log)}")
            if time.monotonic() > deadline:
                raise BenchError(f"the Celery worker did not start within {timeout_s:.0f} s:\n{log_tail(log)}")
            await asyncio.sleep(0.5)

    def stop_worker(self) -> None:
        """Warm shutdown: the running task finishes."""
        self.processes.stop([WORKER], timeout_s=30, leader_only=True)
