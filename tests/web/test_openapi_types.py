"""The dashboard's API types are generated from the server's OpenAPI schema; the committed copy
of that schema (``frontend/src/api/openapi.json``) must be the server's current one, so a
change to the API cannot leave the dashboard's types behind. ``make api-types`` refreshes it."""

from __future__ import annotations

import json
from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

COMMITTED = Path(__file__).resolve().parents[2] / "frontend" / "src" / "api" / "openapi.json"


def test_the_committed_schema_is_the_servers() -> None:
    current = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
    committed = json.loads(COMMITTED.read_text())
    stale = sorted(set(current["paths"]) ^ set(committed["paths"]))
    assert not stale, f"run `make api-types`: paths differ {stale[:5]}"
    assert current == committed, "run `make api-types`: the API changed since frontend/src/api/openapi.json"
