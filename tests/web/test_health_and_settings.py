"""Health endpoints report each dependency; production settings refuse unsafe configuration."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_healthz_reports_database_redis_and_engine(engine_speed) -> None:
    r = Client().get("/healthz")
    body = r.json()
    assert r.status_code == 200, body
    assert set(body["checks"]) == {"database", "redis", "engine"}
    assert all(c["ok"] for c in body["checks"].values())
    assert body["checks"]["engine"]["detail"]["cluster"]["num_devices"] == 8


@pytest.mark.django_db
def test_healthz_degrades_when_redis_is_unreachable(engine_speed, settings) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    r = Client().get("/healthz")
    assert r.status_code == 503
    assert r.json()["checks"]["redis"]["ok"] is False
    assert r.json()["checks"]["database"]["ok"] is True


@pytest.mark.django_db
def test_readyz_checks_migrations() -> None:
    r = Client().get("/readyz")
    assert r.status_code == 200
    assert r.json()["checks"]["migrations"]["detail"] == "all applied"


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_production_refuses_the_default_secret() -> None:
    r = _manage("check", JIGSAW_ENV="production", ALLOWED_HOSTS="jigsaw.example.com")
    assert r.returncode != 0
    assert "SECRET_KEY: production needs its own secret" in r.stderr


def test_check_deploy_is_clean_in_production() -> None:
    r = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        JIGSAW_ENV="production",
        ALLOWED_HOSTS="jigsaw.example.com",
        SECRET_KEY=secrets.token_urlsafe(64),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no issues" in r.stdout


@pytest.mark.skipif(shutil.which("docker") is None, reason="the docker client is not installed")
def test_compose_file_parses() -> None:
    r = subprocess.run(["bash", "docker/check.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if r.returncode == 77:
        pytest.skip("docker client without the compose plugin: " + r.stdout.strip()[-200:])
    assert r.returncode == 0, r.stdout + r.stderr
