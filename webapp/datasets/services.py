"""Writes and checks for datasets: upload (every row checked by the engine), delete, dry-run a
grader, and turn a job spec's ``data.train_files`` / ``data.val_files: "dataset:<name>"`` into
the stored file's path.

Files live at ``<DATASETS_DIR>/<tenant id>/<dataset id>.jsonl`` (``.parquet`` for a Parquet upload,
the suffix by which the engine picks its reader): a dataset's name is only ever a database value,
so no name (``../x``, ``a/b``) can point a path anywhere else.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from tenants.models import Tenant
from webapp import engine_gateway
from webapp.datasets.errors import DatasetExists, DatasetInUse, DatasetInvalid, DatasetTooLarge
from webapp.datasets.models import Dataset
from webapp.datasets.selectors import dataset_get_for_tenant
from webapp.jobs.errors import SpecInvalid
from webapp.jobs.models import TERMINAL_STATUSES, Job

DATASET_REF_PREFIX = "dataset:"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/' or '..')"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_ROWS = 100_000
MAX_LISTED_PROBLEMS = 50
PREVIEW_ROWS = 5
DRY_RUN_MAX_ROWS = 20


def max_bytes() -> int:
    return int(getattr(settings, "DATASET_MAX_BYTES", DEFAULT_MAX_BYTES))


def max_rows() -> int:
    return int(getattr(settings, "DATASET_MAX_ROWS", DEFAULT_MAX_ROWS))


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def tenant_dir(tenant_id: Any) -> Path:
    return Path(settings.DATASETS_DIR).resolve() / str(tenant_id)


def dataset_path(dataset: Dataset) -> Path:
    """The stored file's absolute path, what the engine reads: ``<id>.parquet`` if stored so, else ``<id>.jsonl``."""
    parquet = stored_path(dataset, "parquet")
    return parquet if parquet.exists() else stored_path(dataset, "jsonl")


def stored_path(dataset: Dataset, fmt: str) -> Path:
    return tenant_dir(dataset.tenant_id) / f"{dataset.pk}.{fmt}"


def dataset_ref(name: str) -> str:
    return f"{DATASET_REF_PREFIX}{name}"


def check_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise SpecInvalid(
            "the dataset name is invalid", [{"field": field, "message": f"must be {NAME_RULE}, got {name!r}"}]
        )
    return name


def name_from_filename(filename: str) -> str:
    """``gsm8k-small.jsonl`` (or ``.parquet``) -> ``gsm8k-small`` (still checked by :func:`check_name`)."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".jsonl", ".parquet"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


def too_large(size: int | None = None) -> DatasetTooLarge:
    got = f" (got more than {_mib(max_bytes())})" if size is None else f" (got {_mib(size)})"
    return DatasetTooLarge(
        f"the dataset is too large: at most {_mib(max_bytes())} and {max_rows():,} rows{got}",
        [{"field": "content", "message": f"must be at most {_mib(max_bytes())}{got}"}],
    )


def read_limited(chunks: Iterable[bytes]) -> bytes:
    """Join ``chunks``, refusing (413) as soon as they pass the size limit."""
    limit = max_bytes()
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            raise too_large()
    return bytes(out)


def _problem_details(
    problems: Sequence[engine_gateway.SpecProblem], total: int, field: str = ""
) -> list[dict[str, Any]]:
    details = [{"field": field or p.field, "message": p.message} for p in problems]
    if total > len(problems):
        more = total - len(problems)
        details.append({"field": field or "rows", "message": f"and {more} more bad line{'s' if more != 1 else ''}"})
    return details


def dataset_create(*, tenant: Tenant, user: Any, name: str, content: bytes, filename: str = "") -> Dataset:
    """Check every row through the engine, store the file and its metadata; nothing is stored on any problem.

    JSONL, or Parquet in verl's layout: by ``filename``'s suffix (an uploaded file's name), else
    by the content's Parquet magic bytes."""
    check_name(name)
    if len(content) > max_bytes():
        raise too_large(len(content))
    checked_as = filename if filename.lower().endswith((".jsonl", ".parquet")) else name
    found = engine_gateway.check_dataset(content, filename=checked_as, max_problems=MAX_LISTED_PROBLEMS)
    if found.problem_count:
        n = found.problem_count
        raise DatasetInvalid(
            f"{name}: {n} bad line{'s' if n != 1 else ''}"
            f"{f' (the first {len(found.problems)} listed)' if n > len(found.problems) else ''}; nothing was stored",
            _problem_details(found.problems, n),
        )
    if found.row_count > max_rows():
        raise DatasetTooLarge(
            f"the dataset has {found.row_count:,} rows; the limit is {max_rows():,}",
            [{"field": "content", "message": f"must have at most {max_rows():,} rows, got {found.row_count:,}"}],
        )
    if dataset_get_for_tenant(tenant=tenant, name=name) is not None:
        raise _exists(name)
    dataset = Dataset(
        id=uuid.uuid4(),
        tenant=tenant,
        name=name,
        rows=found.row_count,
        size_bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        created_by=user if getattr(user, "pk", None) else None,
    )
    path = stored_path(dataset, found.format)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
        with transaction.atomic():
            dataset.save(force_insert=True)
    except IntegrityError as exc:
        path.unlink(missing_ok=True)
        raise _exists(name) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        raise
    return dataset


def _exists(name: str) -> DatasetExists:
    return DatasetExists(
        f"a dataset named {name!r} already exists",
        [{"field": "name", "message": f"{name!r} is taken; delete that dataset first or pick another name"}],
    )


def dataset_delete(*, dataset: Dataset) -> None:
    """Remove the row and the file; refused while an unfinished job reads it."""
    path = dataset_path(dataset)
    active = (
        Job.objects.filter(tenant_id=dataset.tenant_id)
        .filter(Q(spec__data__train_files=str(path)) | Q(spec__data__val_files=str(path)))
        .exclude(status__in=TERMINAL_STATUSES)
        .values_list("name", flat=True)[:3]
    )
    if active:
        raise DatasetInUse(
            f"dataset {dataset.name!r} is used by unfinished jobs ({', '.join(active)}); cancel them first"
        )
    dataset.delete()
    path.unlink(missing_ok=True)


def dataset_head(dataset: Dataset, rows: int) -> list[engine_gateway.DatasetRow]:
    """The first ``rows`` good rows, reading only as many lines as that takes (all of a Parquet file)."""
    path = dataset_path(dataset)
    if path.suffix == ".parquet":
        content = path.read_bytes()
        return engine_gateway.check_dataset(content, filename=f"{dataset.name}.parquet", preview_rows=rows).preview
    lines: list[bytes] = []
    found = 0
    with path.open("rb") as f:
        for line in f:
            lines.append(line)
            if line.strip():
                found += 1
                if found >= rows:
                    break
    return engine_gateway.check_dataset(b"".join(lines), filename=dataset.name, preview_rows=rows).preview


def perfect_completion(answer: str, grader: str = "numeric") -> str:
    """What a model that gets it right writes: the answer after the ``####`` mark (``\\boxed{}`` for ``math``)."""
    return f"\\boxed{{{answer}}}" if grader == "math" else f"#### {answer}"


def grader_dry_run(
    *,
    tenant: Tenant,
    grader: str,
    dataset: str | None = None,
    rows: Sequence[Mapping[str, str]] | None = None,
    completions: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Grade the first rows (at most 20) with ``completions`` (default: a perfect model's replies),
    as training would: an installed reward that fails on one scores it 0 and says why."""
    if grader not in engine_gateway.grader_names():
        raise SpecInvalid(
            "unknown grader",
            [{"field": "grader", "message": f"must be one of {', '.join(engine_gateway.grader_names())}"}],
        )
    if dataset is not None:
        stored = dataset_get_for_tenant(tenant=tenant, name=dataset)
        if stored is None:
            raise SpecInvalid(
                f"no dataset named {dataset!r}", [{"field": "dataset", "message": f"no dataset named {dataset!r}"}]
            )
        picked = [(r.line, r.prompt, r.answer) for r in dataset_head(stored, DRY_RUN_MAX_ROWS)]
    else:
        picked = [(i, r["prompt"], r["answer"].strip()) for i, r in enumerate(rows or [], start=1)]
    results = []
    for i, (line, prompt, answer) in enumerate(picked[:DRY_RUN_MAX_ROWS]):
        completion = (
            completions[i] if completions is not None and i < len(completions) else perfect_completion(answer, grader)
        )
        reward, reward_error = engine_gateway.grade(grader=grader, completion=completion, answer=answer)
        results.append(
            {
                "line": line,
                "prompt": prompt,
                "answer": answer,
                "completion": completion,
                "reward": reward,
                "reward_error": reward_error,
                "problem": engine_gateway.grader_answer_problem(grader=grader, answer=answer),
            }
        )
    return results


DATASET_FIELDS = ("train_files", "val_files")
"""The spec's ``data`` fields that name a dataset: training rows and validation rows (verl's names)."""


def resolve_dataset_refs(tenant: Tenant, spec: Mapping[str, Any], *, field_prefix: str = "spec") -> Mapping[str, Any]:
    """``spec`` with ``data.train_files`` and ``data.val_files`` given as ``"dataset:<name>"``
    replaced by that dataset's stored path.

    Only the tenant's own datasets can be named. Any other value (a file path) is refused,
    except the stored path of one of the tenant's datasets (a clone of a job that used one).
    The dataset's answers are checked against ``data.grader`` too, so a bad pairing fails here.
    """
    data = spec.get("data") if isinstance(spec, Mapping) else None
    if not isinstance(data, Mapping):
        return spec
    resolved = dict(data)
    for key in DATASET_FIELDS:
        if isinstance(data.get(key), str) and data[key]:
            # Absent (the workload's own tasks), or not a string: the engine's validation says so.
            resolved[key] = _resolved_ref(tenant, data, key, f"{field_prefix}.data.{key}")
    return {**spec, "data": resolved} if resolved != data else spec


def _resolved_ref(tenant: Tenant, data: Mapping[str, Any], key: str, field: str) -> str:
    value: str = data[key]
    if value.startswith(DATASET_REF_PREFIX):
        name = value[len(DATASET_REF_PREFIX) :]
        dataset = dataset_get_for_tenant(tenant=tenant, name=name)
        if dataset is None:
            raise SpecInvalid(
                f"no dataset named {name!r}",
                [{"field": field, "message": f"no dataset named {name!r}; upload it first (POST /api/v1/datasets)"}],
            )
    else:
        dataset = _own_stored(tenant, value)
        if dataset is None:
            raise SpecInvalid(
                f"data.{key} must name one of your datasets",
                [
                    {
                        "field": field,
                        "message": f'must be "dataset:<name>", one of your uploaded datasets; got {value!r}',
                    }
                ],
            )
    grader = data.get("grader", "numeric")
    if isinstance(grader, str) and grader in engine_gateway.grader_names():
        path = dataset_path(dataset)
        found = engine_gateway.check_dataset(
            path.read_bytes(), filename=f"{dataset.name}{path.suffix}", grader=grader, max_problems=MAX_LISTED_PROBLEMS
        )
        if found.problem_count:
            raise SpecInvalid(
                f"dataset {dataset.name!r} does not suit the {grader} grader",
                [
                    {"field": field, "message": f"{dataset.name}: {d['message']}"}
                    for d in _problem_details(found.problems, found.problem_count)
                ],
            )
    return str(dataset_path(dataset))


def _own_stored(tenant: Tenant, value: str) -> Dataset | None:
    path = Path(value)
    if path.suffix not in (".jsonl", ".parquet") or str(path.parent) != str(tenant_dir(tenant.pk)):
        return None
    try:
        dataset_id = uuid.UUID(path.stem)
    except ValueError:
        return None
    dataset = Dataset.objects.filter(tenant=tenant, pk=dataset_id).first()
    return dataset if dataset is not None and str(dataset_path(dataset)) == value else None
