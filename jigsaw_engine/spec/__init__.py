"""Specs: what users ask for (pipelines) and what the cluster offers, parsed with field paths."""

from jigsaw_engine.spec.cluster import ClusterSpec, parse_cluster_spec
from jigsaw_engine.spec.models import MODEL_CATALOGUE, ModelSpec
from jigsaw_engine.spec.pipeline import (
    Algorithm,
    PipelineSpec,
    SyncMode,
    parse_pipeline_spec,
    validate_pipeline_spec,
)
from jigsaw_engine.spec.workloads import WORKLOADS, WorkloadSpec

__all__ = [
    "MODEL_CATALOGUE",
    "WORKLOADS",
    "Algorithm",
    "ClusterSpec",
    "ModelSpec",
    "PipelineSpec",
    "SyncMode",
    "WorkloadSpec",
    "parse_cluster_spec",
    "parse_pipeline_spec",
    "validate_pipeline_spec",
]
