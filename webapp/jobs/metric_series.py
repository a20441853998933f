"""A job's metric history, read fast: ``JobMetrics`` stores one JSON object per step, and
decoding 20,000 of them with 60 metrics each took 1.5 s of a 4.5 s request. Here each
completed range of ``CHUNK_STEPS`` steps is also kept as a ``JobMetricsChunk`` (float64
columns), sealed by the event pump as a job moves past the range (``seal_chunks``) or by the
first read that finds it missing. A read takes the sealed chunks whose step count still matches
the stored steps and decodes the rest (the current range, at most ``CHUNK_STEPS`` rows, and any
chunk a late step made stale) from JSON, so a step stored a moment ago is in the next fetch.
Downsampling runs the same largest-triangle-three-buckets as ``selectors.downsample`` with
numpy across every series that shares its steps, picking the same points.

``JobMetrics`` rows are written once and removed only with their job (which removes its chunks
too), so a range's row count is enough to tell whether its chunk is current.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from webapp.jobs.models import Job, JobMetrics, JobMetricsChunk

CHUNK_STEPS = 500
"""Steps per chunk: a read decodes at most this many steps' JSON (the current range)."""

_F8 = np.dtype("<f8")
_COUNTS_SQL = (
    f"SELECT step / %s AS chunk, COUNT(*) FROM {JobMetrics._meta.db_table} WHERE job_id = %s GROUP BY 1 ORDER BY 1"
)

_VALUES = connection.ops.quote_name("values")  # a reserved word in SQL
Series = dict[str, list[list[float]]]


@dataclass
class Columns:
    """Metric history as columns: ``values[i]`` is ``names[i]`` at ``steps`` (NaN: not reported)."""

    names: list[str]
    steps: np.ndarray
    values: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.steps)


def columns_from_rows(rows: Iterable[tuple[int, dict[str, Any]]]) -> Columns:
    """Columns of ``(step, values)`` rows in step order; names in the order they first appear."""
    steps: list[float] = []
    found: dict[str, tuple[list[int], list[float]]] = {}
    for r, (step, values) in enumerate(rows):
        steps.append(float(step))
        for name, value in values.items():
            at, vals = found.setdefault(name, ([], []))
            at.append(r)
            vals.append(float(value))
    matrix = np.full((len(found), len(steps)), np.nan)
    for i, (at, vals) in enumerate(found.values()):
        matrix[i, at] = vals
    return Columns(list(found), np.array(steps, dtype=float), matrix)


def _joined(parts: Sequence[Columns]) -> Columns:
    """``parts`` (in step order) as one; a name missing from a part is NaN there."""
    index: dict[str, int] = {}
    for part in parts:
        for name in part.names:
            index.setdefault(name, len(index))
    matrix = np.full((len(index), sum(p.rows for p in parts)), np.nan)
    offset = 0
    for part in parts:
        matrix[[index[n] for n in part.names], offset : offset + part.rows] = part.values
        offset += part.rows
    steps = np.concatenate([p.steps for p in parts]) if parts else np.empty(0)
    return Columns(list(index), steps, matrix)


def _sealed_chunks(job_id: Any) -> dict[int, tuple[int, Columns]]:
    """``{chunk: (rows, columns)}`` of the job's stored chunks. On PostgreSQL the bytes come in
    binary (Django's cursors take text, where each byte travels as two hex digits: a 60 x 20,000
    history's 9.6 MB took about twice as long to fetch)."""
    if connection.vendor == "postgresql":
        sql = f"SELECT chunk, rows, names, steps, {_VALUES} FROM {JobMetricsChunk._meta.db_table} WHERE job_id = %s"
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            fetched = cursor.execute(sql, [job_id], binary=True).fetchall()
    else:
        fields = ("chunk", "rows", "names", "steps", "values")
        fetched = list(JobMetricsChunk.objects.filter(job_id=job_id).values_list(*fields))
    out = {}
    for chunk, rows, names, steps, values in fetched:
        matrix = np.frombuffer(values, dtype=_F8).reshape(len(names), rows)
        out[chunk] = (rows, Columns(list(names), np.frombuffer(steps, dtype=_F8), matrix))
    return out


def _decode_ranges(job_id: Any, chunks: Sequence[int]) -> dict[int, Columns]:
    """The stored steps of ``chunks`` (ranges of ``CHUNK_STEPS``), decoded from JSON, in one query."""
    if not chunks:
        return {}
    spans: list[list[int]] = []  # contiguous runs of chunks, one range condition each
    for c in sorted(chunks):
        if spans and spans[-1][1] == c:
            spans[-1][1] = c + 1
        else:
            spans.append([c, c + 1])
    where = Q()
    for lo, hi in spans:
        where |= Q(step__gte=lo * CHUNK_STEPS, step__lt=hi * CHUNK_STEPS)
    by_chunk: dict[int, list[tuple[int, dict[str, Any]]]] = {c: [] for c in chunks}
    rows = JobMetrics.objects.filter(where, job_id=job_id).order_by("step").values_list("step", "values")
    for step, values in rows:
        by_chunk[step // CHUNK_STEPS].append((step, values))
    return {c: columns_from_rows(r) for c, r in by_chunk.items()}


def _store(job_id: Any, columns: dict[int, Columns]) -> None:
    """Save ``columns`` as chunks, replacing stale ones. Best effort: a job deleted meanwhile
    (its rows gone, the insert refused) keeps no chunk, and the read that asked still answers."""
    chunks = [
        JobMetricsChunk(
            job_id=job_id,
            chunk=c,
            rows=col.rows,
            names=col.names,
            steps=col.steps.astype(_F8).tobytes(),
            values=np.ascontiguousarray(col.values, dtype=_F8).tobytes(),
        )
        for c, col in columns.items()
        if col.rows
    ]
    if not chunks:
        return
    try:
        with transaction.atomic():
            JobMetricsChunk.objects.bulk_create(
                chunks,
                update_conflicts=True,
                unique_fields=["job", "chunk"],
                update_fields=["rows", "names", "steps", "values"],
            )
    except IntegrityError:
        pass


def seal_chunks(job_id: Any, chunks: Iterable[int]) -> None:
    """Build (or rebuild) the chunks of these step ranges from the stored steps."""
    _store(job_id, _decode_ranges(job_id, list(chunks)))


def job_columns(job: Job) -> Columns:
    """The job's whole metric history as columns, sealing completed ranges found without a
    current chunk (the last range is always read from JSON: steps may still arrive in it)."""
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS_SQL, [CHUNK_STEPS, job.pk])
        counts: dict[int, int] = dict(cursor.fetchall())
    if not counts:
        return Columns([], np.empty(0), np.empty((0, 0)))
    current = max(counts)
    sealed = {c: col for c, (rows, col) in _sealed_chunks(job.pk).items() if c != current and rows == counts.get(c)}
    decoded = _decode_ranges(job.pk, [c for c in counts if c not in sealed])
    _store(job.pk, {c: col for c, col in decoded.items() if c != current})
    return _joined([sealed[c] if c in sealed else decoded[c] for c in sorted(counts)])


def lttb_indices(x: np.ndarray, ys: np.ndarray, max_points: int) -> np.ndarray:
    """``selectors.downsample``'s choice for each row of ``ys`` (all sharing the steps ``x``,
    ``max_points`` < ``len(x)``, at least 3) as indices, one row per series. The loop runs over
    buckets, each bucket computed for every series at once; sums are sequential (``cumsum``)
    and the area takes the same operations in the same order, so the same points win."""
    k, n = ys.shape
    every = np.arange(k)
    out = np.empty((k, max_points), dtype=np.intp)
    out[:, 0], out[:, -1] = 0, n - 1
    bucket = (n - 2) / (max_points - 2)
    a = np.zeros(k, dtype=np.intp)
    for i in range(max_points - 2):
        lo, hi = int(i * bucket) + 1, int((i + 1) * bucket) + 1
        nxt_lo, nxt_hi = hi, min(int((i + 2) * bucket) + 1, n)
        if nxt_hi <= nxt_lo:
            nxt_lo, nxt_hi = n - 1, n
        count = nxt_hi - nxt_lo
        avg_x = np.cumsum(x[nxt_lo:nxt_hi])[-1] / count
        avg_y = np.cumsum(ys[:, nxt_lo:nxt_hi], axis=1)[:, -1] / count
        ax, ay = x[a], ys[every, a]
        area = np.abs(
            (ax - avg_x)[:, None] * (ys[:, lo:hi] - ay[:, None]) - (ax[:, None] - x[lo:hi]) * (avg_y - ay)[:, None]
        )
        a = lo + np.argmax(area, axis=1)
        out[:, i + 1] = a
    return out


def series_from_columns(columns: Columns, *, names: list[str] | None, max_points: int | None) -> Series:
    """``{metric: [[step, value], ...]}`` as ``selectors.job_metric_series`` answers it."""
    wanted = [i for i, name in enumerate(columns.names) if names is None or name in names]
    groups: dict[bytes, list[int]] = {}  # series with the same steps downsample together
    present = ~np.isnan(columns.values)
    for i in wanted:
        groups.setdefault(np.packbits(present[i]).tobytes(), []).append(i)
    out: dict[int, list[list[float]]] = {}
    for members in groups.values():
        mask = present[members[0]]
        x, ys = columns.steps[mask], columns.values[members][:, mask]
        if max_points is not None and 3 <= max_points < len(x):
            picked = lttb_indices(x, ys, max_points)
            for row, i in enumerate(members):
                out[i] = np.column_stack((x[picked[row]], ys[row, picked[row]])).tolist()
        elif max_points is not None and max_points < len(x):  # fewer than 3: first and last
            for row, i in enumerate(members):
                out[i] = [[float(x[0]), float(ys[row, 0])], [float(x[-1]), float(ys[row, -1])]][: max(max_points, 1)]
        else:
            for row, i in enumerate(members):
                out[i] = np.column_stack((x, ys[row])).tolist()
    return {columns.names[i]: out[i] for i in wanted}
