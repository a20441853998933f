"""An arrivals file: a cluster, its tenants and the jobs they submit over a day, in YAML or JSON.

    cluster: {num_nodes: 8, devices_per_node: 8, device_type: h100}
    day_s: 86400
    tenants:
      - {name: research, guarantee_gpus: 24, borrow_limit_gpus: 24, weight: 2.0}
      - {name: product, guarantee_gpus: 16, borrow_limit_gpus: 8}
    jobs:
      - tenant: research
        arrival_s: 3600.0
        pipeline: {name: j0, model: qwen2.5-7b, workload: math, resources: {num_gpus: 8}, ...}

A job's priority is its pipeline's ``priority``, as for a job submitted to the service.

``jigsaw simulate --arrivals FILE`` runs every policy on it under the service's admission;
``jigsaw arrivals`` (:func:`~jigsaw_engine.bench.arrivals_gen.generate_arrivals`)
writes one at a chosen offered load. Every problem is reported with its field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.cluster import ClusterSpec, check_fits_cluster, parse_cluster_spec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.spec.reader import SpecReader, join_path
from jigsaw_engine.spec.workload_file import read_document


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    guarantee_gpus: int
    borrow_limit_gpus: int
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Arrival:
    job_id: str
    tenant: str
    arrival_s: float
    spec: PipelineSpec


@dataclass(frozen=True, slots=True)
class ArrivalsFile:
    cluster: ClusterSpec
    day_s: float
    tenants: tuple[Tenant, ...]
    jobs: tuple[Arrival, ...]
    """In order of arrival."""
    source: Mapping[str, Any]
    """Where the file came from (the generator's parameters), reported beside the results."""


def load_arrivals_file(path: Path) -> ArrivalsFile:
    return parse_arrivals(read_document(path))


def parse_arrivals(raw: Any) -> ArrivalsFile:
    """The file's cluster, tenants and jobs; a :class:`SpecError` naming every problem."""
    errors: list[FieldError] = []
    top = SpecReader(raw, "", errors)
    cluster = ClusterSpec(1, 8, "h100")
    try:
        cluster = parse_cluster_spec(top.raw("cluster", {}))
    except SpecError as exc:
        errors += exc.errors
    day_s = top.number("day_s", 86400.0, minimum=1.0)
    source = top.raw("source", {})
    tenants = _tenants(top, cluster, errors)
    names = {t.name for t in tenants}
    jobs: list[Arrival] = []
    raw_jobs = top.raw("jobs")
    if not isinstance(raw_jobs, list) or not raw_jobs:
        errors.append(FieldError("jobs", "must be a non-empty list of jobs"))
        raw_jobs = []
    for i, item in enumerate(raw_jobs):
        path = join_path("jobs", i)
        job = SpecReader(item, path, errors)
        tenant = job.text("tenant", "")
        if tenant not in names:
            job.error("tenant", f"unknown tenant {tenant!r}; the file's tenants: {', '.join(sorted(names))}")
        arrival_s = job.number("arrival_s", 0.0, minimum=0.0)
        pipeline = job.raw("pipeline")
        job.finish()
        try:
            spec = parse_pipeline_spec(pipeline, path=join_path(path, "pipeline"))
        except SpecError as exc:
            errors += exc.errors
            continue
        fits = check_fits_cluster(spec, cluster)
        errors += [FieldError(f"{path}.pipeline.{e.field}", e.message) for e in fits]
        jobs.append(Arrival(f"j{i}", tenant, arrival_s, spec))
    top.finish()
    if errors:
        raise SpecError(errors)
    jobs.sort(key=lambda j: (j.arrival_s, int(j.job_id[1:])))
    return ArrivalsFile(cluster, day_s, tuple(tenants), tuple(jobs), dict(source) if isinstance(source, dict) else {})


def _tenants(top: SpecReader, cluster: ClusterSpec, errors: list[FieldError]) -> list[Tenant]:
    raw = top.raw("tenants")
    if not isinstance(raw, list) or not raw:
        errors.append(FieldError("tenants", "must be a non-empty list of tenants"))
        return []
    tenants: list[Tenant] = []
    for i, item in enumerate(raw):
        t = SpecReader(item, join_path("tenants", i), errors)
        name = t.text("name", f"tenant{i}")
        guarantee = t.integer("guarantee_gpus", 0, minimum=0, maximum=cluster.num_devices)
        borrow = t.integer("borrow_limit_gpus", 0, minimum=0)
        weight = t.number("weight", 1.0, minimum=1e-6)
        t.finish()
        if any(other.name == name for other in tenants):
            t.error("name", f"tenant {name!r} is named twice")
        tenants.append(Tenant(name, guarantee, borrow, weight))
    promised = sum(t.guarantee_gpus for t in tenants)
    if promised > cluster.num_devices:
        errors.append(
            FieldError(
                "tenants",
                f"guarantees add up to {promised} GPUs, more than the cluster's {cluster.num_devices}; lower them",
            )
        )
    return tenants


def arrivals_document(
    cluster: ClusterSpec,
    day_s: float,
    tenants: list[Tenant],
    jobs: list[tuple[str, float, dict[str, Any]]],
    source: Mapping[str, Any],
) -> dict[str, Any]:
    """The mapping :func:`parse_arrivals` reads: ``jobs`` as (tenant, arrival_s, pipeline spec)."""
    return {
        "cluster": {
            "num_nodes": cluster.num_nodes,
            "devices_per_node": cluster.devices_per_node,
            "device_type": cluster.device_type,
        },
        "day_s": day_s,
        "source": dict(source),
        "tenants": [
            {
                "name": t.name,
                "guarantee_gpus": t.guarantee_gpus,
                "borrow_limit_gpus": t.borrow_limit_gpus,
                "weight": t.weight,
            }
            for t in tenants
        ],
        "jobs": [{"tenant": tenant, "arrival_s": round(at, 3), "pipeline": spec} for tenant, at, spec in jobs],
    }
