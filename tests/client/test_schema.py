"""The client is written against the OpenAPI schema: every route it calls must be in the
live server's schema, so renaming or removing one on the server fails here first."""

from __future__ import annotations

from typing import Any

import pytest

from jigsaw_client.client import JigsawClient
from jigsaw_client.routes import API_ROUTES

pytestmark = pytest.mark.django_db(transaction=True)

HTTP_METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


def test_every_route_the_client_calls_is_in_the_live_schema(live_server_url: str, actor: Any) -> None:
    with JigsawClient(live_server_url, actor.token) as client:
        schema = client.schema()

    assert schema["openapi"].startswith("3.")
    # The router accepts /jobs and /jobs/ alike; the schema spells them with the slash.
    documented = {
        (method.upper(), path.rstrip("/"))
        for path, operations in schema["paths"].items()
        for method in operations
        if method in HTTP_METHODS
    }
    missing = [f"{r.method} {r.template}" for r in API_ROUTES if (r.method, r.template) not in documented]
    assert missing == [], f"the client calls routes the server does not document: {missing}"
    assert schema["components"]["securitySchemes"]["apiToken"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "jrl_<key id>_<secret>",
    }
