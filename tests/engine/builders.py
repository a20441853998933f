"""Builders for engine tests: small specs and clusters with one line each."""

from __future__ import annotations

from typing import Any

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.spec.cluster import ClusterSpec


def make_spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "t",
        "algorithm": "grpo",
        "model": "qwen2.5-1.5b",
        "workload": "gsm8k",
        "data": {"train_batch_size": 16},
        "rollout": {"n": 4, "max_response_length": 1024},
        "resources": {"num_gpus": 2},
        "trainer": {"total_steps": 3},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


def make_cluster(num_gpus: int = 8, device_type: str = "h100") -> ClusterSpec:
    return ClusterSpec(num_nodes=1, devices_per_node=num_gpus, device_type=device_type)


def make_cost(device_type: str = "h100") -> RooflineCostModel:
    return RooflineCostModel(load_device_profile(device_type))
