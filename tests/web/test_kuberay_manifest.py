"""The KubeRay manifest (``docker/kuberay/raycluster.yaml``) passes its validator, and the
validator refuses the mistakes that would expose Ray or leave GPU pods without GPUs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"
CHECK = DOCKER / "kuberay" / "check_raycluster.py"
MANIFEST = DOCKER / "kuberay" / "raycluster.yaml"


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), str(path)], capture_output=True, text=True, timeout=60)


def test_the_shipped_manifest_is_valid() -> None:
    result = validate(MANIFEST)
    assert result.returncode == 0, result.stderr
    assert "GPU groups h100" in result.stdout and "a100" in result.stdout


def _cluster(docs: list[Any]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "RayCluster")["spec"]


def _head(docs: list[Any]) -> dict[str, Any]:
    return _cluster(docs)["headGroupSpec"]


def _worker(docs: list[Any], group: str) -> dict[str, Any]:
    spec = next(g for g in _cluster(docs)["workerGroupSpecs"] if g["groupName"] == group)
    container: dict[str, Any] = spec["template"]["spec"]["containers"][0]
    return container


def _policy(docs: list[Any]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]


MUTATIONS: dict[str, tuple[Callable[[list[Any]], None], str]] = {
    "head on a NodePort": (lambda d: _head(d).update(serviceType="NodePort"), "serviceType must be ClusterIP"),
    "dashboard on": (
        lambda d: _head(d)["rayStartParams"].update({"include-dashboard": "true"}),
        "include-dashboard",
    ),
    "GCS on Redis's port": (lambda d: _head(d)["rayStartParams"].update(port="6379"), "rayStartParams.port"),
    "a worker group without GPUs": (
        lambda d: _worker(d, "a100")["resources"]["limits"].pop("nvidia.com/gpu"),
        "workerGroupSpecs[a100]: the worker container needs a positive nvidia.com/gpu limit",
    ),
    "another image": (
        lambda d: _worker(d, "h100").update(image="rayproject/ray:2.60.0-gpu"),
        "must be 'jigsawrl-gpu-worker:latest'",
    ),
    "an exposing Service": (
        lambda d: d.append({"kind": "Service", "metadata": {"name": "ray"}, "spec": {"type": "LoadBalancer"}}),
        "type LoadBalancer exposes Ray",
    ),
    "the policy opens every port": (
        lambda d: _policy(d)["ingress"][1].pop("ports"),
        "may reach 10001 only",
    ),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_the_validator_refuses(name: str, tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    mutate, expected = MUTATIONS[name]
    mutate(docs)
    broken = tmp_path / "raycluster.yaml"
    broken.write_text(yaml.safe_dump_all(docs))

    result = validate(broken)
    assert result.returncode == 1, result.stdout
    assert expected in result.stderr
