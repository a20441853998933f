"""A workload file: one cluster plus any mix of pipelines, in YAML or JSON.

    cluster: {num_nodes: 1, devices_per_node: 8, device_type: h100}
    pipelines:
      - {name: math, model: qwen2.5-7b, workload: math, resources: {num_gpus: 4}}
      - {name: search, model: qwen2.5-3b, workload: search, resources: {num_gpus: 4}}

Every problem is reported with its path (``pipelines[1].rollout.n: must be >= 1, got 0``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.cluster import ClusterSpec, check_fits_cluster, parse_cluster_spec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.reader import join_path


@dataclass(frozen=True, slots=True)
class WorkloadFile:
    cluster: ClusterSpec
    pipelines: list[dict[str, Any]]
    """The pipeline specs as written (each one valid), in file order."""


def load_workload_file(path: Path) -> WorkloadFile:
    text = path.read_text()
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecError(
            [FieldError("<file>", f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}")]
        ) from None
    return parse_workload(raw)


def parse_workload(raw: Any) -> WorkloadFile:
    errors: list[FieldError] = []
    if not isinstance(raw, Mapping):
        raise SpecError(
            [FieldError("<root>", f"must be a mapping with cluster and pipelines, got {type(raw).__name__}")]
        )
    unknown = sorted(set(raw) - {"cluster", "pipelines"})
    errors += [FieldError(k, "unknown field; known fields: cluster, pipelines") for k in unknown]
    cluster = ClusterSpec(1, 8, "h100")
    try:
        cluster = parse_cluster_spec(raw.get("cluster", {}))
    except SpecError as exc:
        errors += exc.errors
    pipelines = raw.get("pipelines")
    if not isinstance(pipelines, list) or not pipelines:
        errors.append(FieldError("pipelines", "must be a non-empty list of pipeline specs"))
        pipelines = []
    for i, spec in enumerate(pipelines):
        path = join_path("pipelines", i)
        try:
            parsed = parse_pipeline_spec(spec, path=path)
        except SpecError as exc:
            errors += exc.errors
            continue
        errors += [FieldError(f"{path}.{e.field}", e.message) for e in check_fits_cluster(parsed, cluster)]
    if errors:
        raise SpecError(errors)
    return WorkloadFile(cluster, [dict(p) for p in pipelines])
