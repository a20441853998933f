"""CSV export of a job's metrics: one row per step, one column per metric."""

from __future__ import annotations

import csv
import io
from typing import Any

from rest_framework.renderers import BaseRenderer


def metrics_csv(series: dict[str, list[list[float]]]) -> str:
    names = sorted(series)
    rows: dict[float, dict[str, float]] = {}
    for name in names:
        for step, value in series[name]:
            rows.setdefault(step, {})[name] = value
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["step", *names])
    for step in sorted(rows):
        writer.writerow([int(step), *(rows[step].get(n, "") for n in names)])
    return out.getvalue()


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, str):
            return data.encode()
        # Errors (or anything else) rendered as CSV stay readable: one line of JSON-ish text.
        return str(data).encode()
