"""``ClusterSpec``: the shared cluster the engine multiplexes pipelines onto."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.spec.reader import SpecReader

DEVICE_TYPES = ("h100", "a100", "h200", "cpu")


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    num_nodes: int
    devices_per_node: int
    device_type: str
    """One of :data:`DEVICE_TYPES`; selects the cost model's device profile."""

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node


def parse_cluster_spec(data: Mapping[str, Any] | Any, *, path: str = "cluster") -> ClusterSpec:
    errors: list[FieldError] = []
    r = SpecReader(data, path, errors)
    spec = ClusterSpec(
        num_nodes=r.integer("num_nodes", 1, minimum=1, maximum=1024),
        devices_per_node=r.integer("devices_per_node", 8, minimum=1, maximum=16),
        device_type=r.choice("device_type", "h100", DEVICE_TYPES),
    )
    r.finish()
    if errors:
        raise SpecError(errors)
    return spec


def check_fits_cluster(spec: PipelineSpec, cluster: ClusterSpec) -> list[FieldError]:
    if spec.resources.num_gpus > cluster.num_devices:
        return [
            FieldError(
                "resources.num_gpus",
                f"must be <= {cluster.num_devices} (the cluster's devices), got {spec.resources.num_gpus}",
            )
        ]
    return []
