"""The README's main job, started for real and stopped: it must come up, submit both
tenants' pipelines through the API and see them run (``scripts/demo.py --smoke``)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.ray]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect("postgres://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_demo_starts_submits_and_runs_jobs() -> None:
    pytest.importorskip("django")
    env = dict(os.environ)
    env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/jigsawrl_demo_check"
    drop_database("jigsawrl_demo_check")  # a first run: no jobs of an earlier check waiting
    env["REDIS_URL"] = "redis://127.0.0.1:6379/7"
    env["CHANNELS_PREFIX"] = "jigsaw-demo-check"
    env["CELERY_QUEUE"] = "jigsaw-demo-check"
    cmd = [sys.executable, "scripts/demo.py", "--smoke", "--port", str(free_port()), "--ray-port", str(free_port())]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "JigsawRL demo is up" in out and "[full: PostgreSQL, Redis" in out
    assert len(re.findall(r"submitted : \[(acme|globex)\]", out)) == 4
    assert re.search(r"API token : acme: jrl_\w+_", out)
    assert "smoke: all jobs reached running" in out


@pytest.mark.parametrize("real", [False, True], ids=["simulated", "real"])
def test_demo_standalone_mode_needs_no_services(real: bool, tmp_path: Path) -> None:
    pytest.importorskip("django")
    env = {**os.environ, "STANDALONE_DB": str(tmp_path / "standalone.sqlite3")}  # a first run's state
    cmd = [sys.executable, "scripts/demo.py", "--smoke", "--standalone", "--port", str(free_port())]
    cmd += ["--real"] if real else []
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "STANDALONE: SQLite, in-process tasks and channel layer (--standalone)" in out
    assert "smoke: all jobs reached running" in out
    if real:  # tiny models trained for real: the presets of real mode were submitted
        assert "REAL tiny models" in out and "submitted : [acme] arith-grpo" in out
