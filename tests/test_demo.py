"""The README's main job, started for real and stopped: it must come up, submit both
tenants' pipelines through the API and see them run, and keep new jobs coming while it runs
(``scripts/demo.py``; ``--smoke`` where start-up is all that is checked)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from devstack.launcher import free_port

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.ray]


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect("postgres://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.timeout(480)  # start-up, about two minutes of watching, shut-down
def test_demo_starts_keeps_the_cluster_busy_and_hides_debug_pages(tmp_path: Path) -> None:
    """A newcomer who opens the dashboard minutes after start-up still sees both tenants'
    jobs running and queueing (the first four are long done by then); the demo answers an
    unknown address without Django's debug page (DEBUG is off unless --debug)."""
    pytest.importorskip("django")
    env = dict(os.environ)
    env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/jigsawrl_demo_check"
    drop_database("jigsawrl_demo_check")  # a first run: no jobs of an earlier check waiting
    env["REDIS_URL"] = "redis://127.0.0.1:6379/7"
    env["CHANNELS_PREFIX"] = "jigsaw-demo-check"
    env["CELERY_QUEUE"] = "jigsaw-demo-check"
    env.pop("DEBUG", None)
    # The demo's clock run 2.5x faster, new jobs arriving 2.5x as often: the same story in less time.
    env["ENGINE_SPEED"] = "50"
    port = free_port()
    cmd = [sys.executable, "scripts/demo.py", "--port", str(port), "--ray-port", str(free_port())]
    cmd += ["--jobs-per-minute", "20"]
    log = tmp_path / "demo.out"
    with log.open("wb") as out:
        demo = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        banner = wait_for_banner(demo, log, timeout_s=240)
        assert "[full: PostgreSQL, Redis" in banner
        assert len(re.findall(r"submitted : \[(acme|globex)\]", banner)) == 4
        assert re.search(r"API token : acme: jrl_\w+_", banner)
        assert re.search(r"new jobs  : about 20 a minute keep arriving from both tenants, until Ctrl-C", banner), banner
        base = f"http://127.0.0.1:{port}"
        assert_no_debug_pages(base)
        tokens = dict(re.findall(r"API token : (\w+): (\S+)", banner))
        first = set(re.findall(r"/jobs/([0-9a-f-]{36})", banner))
        watch_until_busy_after_first_jobs(base, tokens, first, timeout_s=180)
    finally:
        stop_demo(demo)
    out = log.read_text()
    assert demo.returncode == 0, out[-3000:]
    assert "stopping ..." in out


def wait_for_banner(demo: subprocess.Popen[bytes], log: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "Ctrl-C stops everything" in text:
            return text
        assert demo.poll() is None, f"the demo exited with {demo.returncode}:\n{text[-3000:]}"
        time.sleep(1)
    raise AssertionError(f"no banner after {timeout_s} s:\n{log.read_text(errors='replace')[-3000:]}")


def get(url: str, token: str = "") -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def assert_no_debug_pages(base: str) -> None:
    for path in ("/no-such-page", "/api/v1/no-such-route", "/static/no-such-file.js"):
        status, body = get(base + path)
        assert status == 404, (path, status, body[:500])
        for tell in ("DEBUG = True", "URLconf", "urlpatterns", "Traceback"):
            assert tell not in body, (path, body[:2000])
    # DEBUG off, the dashboard's files are still served (whitenoise, not Django's debug view).
    index = ROOT / "frontend" / "dist" / "index.html"
    if index.exists():
        for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', index.read_text()):
            status, _ = get(base + asset)
            assert status == 200, asset
    status, body = get(base + "/accounts/login/")
    assert status == 200 and "password" in body


def watch_until_busy_after_first_jobs(base: str, tokens: dict[str, str], first: set[str], timeout_s: float) -> None:
    """Poll both tenants' job lists, as their clients would, until the first four jobs have
    finished and both tenants again have jobs running; by then a later job must have waited
    for its tenant's quota."""
    assert set(tokens) == {"acme", "globex"} and len(first) == 4
    deadline = time.monotonic() + timeout_s
    held_by_quota: set[str] = set()
    history: list[str] = []
    while time.monotonic() < deadline:
        jobs = {
            t: json.loads(get(f"{base}/api/v1/jobs?page_size=200", token)[1])["results"] for t, token in tokens.items()
        }
        every = [j for js in jobs.values() for j in js]
        held_by_quota |= {
            j["id"]
            for j in every
            if j["id"] not in first and j["status"] == "queued" and j["status_reason"].startswith("quota:")
        }
        first_states = sorted(j["status"] for j in every if j["id"] in first)
        running = {t: sum(j["status"] == "running" for j in js) for t, js in jobs.items()}
        history.append(f"first {first_states} running {running} {len(every)} jobs, {len(held_by_quota)} held by quota")
        assert "failed" not in first_states, history[-1]
        if first_states == ["succeeded"] * 4 and all(running.values()) and held_by_quota:
            timeline = json.loads(get(f"{base}/api/v1/cluster/timeline?window_s=600", tokens["acme"])[1])
            names = {span["job_name"] for span in timeline["spans"]}
            assert "another tenant's job" in names and len(names) >= 2, names  # several tenants' sub-stages
            return
        time.sleep(2)
    raise AssertionError("the cluster did not stay busy:\n" + "\n".join(history[-30:]))


def stop_demo(demo: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, as a user stops it: the demo stops everything it started."""
    if demo.poll() is None:
        demo.send_signal(signal.SIGINT)
    try:
        demo.wait(timeout=60)
    except subprocess.TimeoutExpired:
        demo.kill()
        demo.wait()


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
