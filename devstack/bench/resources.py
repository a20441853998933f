"""What a load costs: CPU of the server and of the load generator (from /proc), the load
average, database connections and sessions, and each process's resident memory. Linux only."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis

from devstack.bench.config import SOAK_SAMPLE_S

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


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


def machine_info(server_workers: int) -> dict[str, Any]:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "cpu_count": os.cpu_count(),
        "nproc": int(nproc) if nproc.isdigit() else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "server_workers": server_workers,
    }


class Sampler(threading.Thread):
    """Every half second: the 1-minute load average and the open connections to the bench
    database (per-request connections show here)."""

    def __init__(self, admin_url: str, database: str) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.admin_url = admin_url
        self.database = database
        self.samples: list[tuple[float, float, int]] = []  # (monotonic time, load1, db connections)
        self.stopped = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self.stopped.wait(0.5):
                query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                row = conn.execute(query, (self.database,)).fetchone()
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


def db_sessions(admin_url: str, database: str) -> int:
    """Sessions ever opened on the bench database (PostgreSQL 14+; flushed within ~1 s)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (database,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@dataclass
class PhaseMeter:
    """CPU, load and database sessions over one phase."""

    server_pid: int
    sampler: Sampler
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
        self.sessions = db_sessions(self.sampler.admin_url, self.sampler.database)
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
            "db_sessions_opened": db_sessions(self.sampler.admin_url, self.sampler.database) - self.sessions,
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            **self.sampler.between(self.start, time.monotonic()),
        }


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

    def __init__(self, roots: dict[str, int], redis_url: str, queue: str) -> None:
        super().__init__(name="soak-meter", daemon=True)
        self.roots = roots
        self.redis_url = redis_url
        self.queue = queue
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
                self.backlog.append((now, int(client.llen(self.queue))))
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
