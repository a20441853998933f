"""A workload file: one cluster plus any mix of pipelines, in YAML or JSON.

    cluster: {num_nodes: 1, devices_per_node: 8, device_type: h100}
    pipelines:
      - {name: math, model: qwen2.5-7b, workload: math, resources: {num_gpus: 4}}
      - {name: search, model: qwen2.5-3b, workload: search, resources: {num_gpus: 4}}

Every problem is reported with its path (``pipelines[1].rollout.n: must be >= 1, got 0``).
``jigsaw validate`` takes a workload or a single pipeline spec: :func:`check_document` tells
them apart.
"""

from __future__ import annotations

import difflib
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


FILE_FIELD = "<file>"
"""The field of a problem with the file itself (unreadable, not YAML or JSON, empty)."""
WORKLOAD_FIELDS = ("cluster", "pipelines")


def read_document(path: Path) -> Any:
    """A YAML or JSON file's contents (JSON by the ``.json`` suffix), relative checkpoint paths
    read from the file's folder; every way the file itself can be wrong is a :class:`SpecError`
    on :data:`FILE_FIELD`, in one line."""
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _file_error(f"not a text file (not UTF-8 at byte {exc.start}); expected {kind}") from None
    except OSError as exc:
        raise _file_error(f"cannot read it: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise _file_error(f"not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise _file_error(f"not valid YAML: {_yaml_problem(exc)}") from None
    if raw is None:
        raise _file_error(f"is empty; expected a {kind} mapping")
    return anchor_checkpoint_paths(raw, path.resolve().parent)


def load_workload_file(path: Path) -> WorkloadFile:
    return parse_workload(read_document(path))


def anchor_checkpoint_paths(raw: Any, folder: Path) -> Any:
    """A document (a workload, or one pipeline spec) whose relative ``model.path`` entries are
    made absolute from ``folder``, the file's own: the repository's examples name checkpoints so."""
    if is_workload(raw) and isinstance(raw.get("pipelines"), list):
        return {**raw, "pipelines": [anchor_checkpoint_paths(spec, folder) for spec in raw["pipelines"]]}
    model = raw.get("model") if isinstance(raw, Mapping) else None
    if isinstance(model, Mapping):
        where = model.get("path")
        if isinstance(where, str) and where.strip() and not Path(where).expanduser().is_absolute():
            return {**raw, "model": {**model, "path": str(folder / where)}}
    return raw


def is_workload(raw: Any) -> bool:
    """Whether a document is a workload (a cluster and pipelines) rather than one pipeline
    spec: it has either key, or one misspelt closely enough that it was surely meant."""
    if not isinstance(raw, Mapping):
        return False
    return any(difflib.get_close_matches(str(key), WORKLOAD_FIELDS, n=1, cutoff=0.8) for key in raw)


def check_document(raw: Any) -> str:
    """What a document is, once it parses as one (``a pipeline spec``, ``a workload of 3
    pipelines on 8 x h100``); a :class:`SpecError` listing every problem otherwise."""
    if is_workload(raw):
        workload = parse_workload(raw)
        cluster = workload.cluster
        count = len(workload.pipelines)
        return (
            f"a workload of {count} pipeline{'s' if count != 1 else ''} "
            f"on {cluster.num_devices} x {cluster.device_type}"
        )
    if not isinstance(raw, Mapping):
        what = "a pipeline spec, or a workload with cluster and pipelines"
        raise SpecError([FieldError("<root>", f"must be a mapping ({what}), got {type(raw).__name__}")])
    parse_pipeline_spec(raw)
    return "a pipeline spec"


def _file_error(message: str) -> SpecError:
    return SpecError([FieldError(FILE_FIELD, message)])


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's several-line message as one line: where, and what."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(exc).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def parse_workload(raw: Any) -> WorkloadFile:
    errors: list[FieldError] = []
    if not isinstance(raw, Mapping):
        raise SpecError(
            [FieldError("<root>", f"must be a mapping with cluster and pipelines, got {type(raw).__name__}")]
        )
    for key in sorted(set(raw) - set(WORKLOAD_FIELDS), key=str):
        close = difflib.get_close_matches(str(key), WORKLOAD_FIELDS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(WORKLOAD_FIELDS)}"
        errors.append(FieldError(str(key), f"unknown field; {hint}"))
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
