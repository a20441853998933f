"""A PostgreSQL and a Redis of the fault suite's own, on free ports: the suite kills and
restarts them, so they must not be the machine's shared servers."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
from pathlib import Path

from devstack.launcher import free_port, wait_port


def postgres_bin_dir() -> Path | None:
    """Debian keeps the server binaries off PATH, one folder per major version."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


class PrivatePostgres:
    """A throw-away cluster (``initdb``) with fsync off. PostgreSQL refuses to run as root, so
    as root its commands run as the ``postgres`` user."""

    def __init__(self, root: Path) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
        self.bin = bin_dir
        self.root = root / "pg"
        self.data = self.root / "data"
        self.port = free_port()

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *cmd: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True)

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.root, "postgres")
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        log = str(self.root / "log")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends sessions cleanly; ``immediate`` is a crash (recovery runs at start)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")


class PrivateRedis:
    """Keeps nothing on disk, like the machine's: a restart loses queued tasks and groups."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.log = root / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--logfile", str(self.log)]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        wait_port(self.port, "redis-server", 20)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
