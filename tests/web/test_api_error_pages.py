"""Under /api/ every error is JSON in the one error shape, with DEBUG on (the demo) or off:
never Django's debug pages, which list the URL patterns and show tracebacks. A server error
shows the client only a request id, which the log holds beside the traceback."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client
from django.test.utils import override_settings

from tests.hostile.helpers import client_for, error_of
from tests.web.crash_urls import SECRET

pytestmark = pytest.mark.django_db

MODES = [pytest.param(True, id="debug"), pytest.param(False, id="no-debug")]


def assert_json_error(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.content[:300]
    assert r["Content-Type"] == "application/json", r.content[:300]
    assert r["X-Request-ID"]
    error = error_of(r)
    assert error["code"] == code, error
    text = r.content.decode()
    assert "Traceback" not in text and "urlpatterns" not in text and "DEBUG" not in text
    return error


@pytest.mark.parametrize("debug", MODES)
@pytest.mark.parametrize("method", ["get", "post", "delete"])
@pytest.mark.parametrize(
    "path", ["/api/v1/nope", "/api/v2/x", "/api/whatever", "/api/", "/api", "/api/v1/", "/api/v1/jobs/1/nope"]
)
def test_unknown_api_paths_answer_a_json_404(debug: bool, method: str, path: str) -> None:
    with override_settings(DEBUG=debug):
        r = getattr(Client(raise_request_exception=False), method)(path)
    error = assert_json_error(r, 404, "not_found")
    assert path in error["message"]


@pytest.mark.parametrize("debug", MODES)
@pytest.mark.parametrize(
    ("method", "path"), [("delete", "/api/v1/quota"), ("put", "/api/v1/me"), ("post", "/api/v1/presets")]
)
def test_a_wrong_method_on_a_real_route_answers_a_json_405(
    make_actor: Any, debug: bool, method: str, path: str
) -> None:
    actor = make_actor("acme")
    with override_settings(DEBUG=debug):
        r = getattr(client_for(actor.token), method)(path)
    assert_json_error(r, 405, "method_not_allowed")
    assert method.upper() not in r["Allow"]


CRASHES = [
    pytest.param("/api/v1/test/crash", id="api-view"),
    pytest.param("/api/v1/test/crash-plain", id="plain-view"),
    pytest.param("/api/v1/test/crash-in-middleware", id="middleware"),
]


@pytest.mark.parametrize("debug", MODES)
@pytest.mark.parametrize("path", CRASHES)
def test_a_crash_shows_only_a_request_id_that_the_log_holds(caplog: Any, debug: bool, path: str) -> None:
    from django.conf import settings

    middleware = [*settings.MIDDLEWARE, "tests.web.crash_urls.CrashingMiddleware"]
    with (
        override_settings(DEBUG=debug, ROOT_URLCONF="tests.web.crash_urls", MIDDLEWARE=middleware),
        caplog.at_level(logging.ERROR),
    ):
        r = Client(raise_request_exception=False).get(path)
    error = assert_json_error(r, 500, "server_error")
    assert SECRET not in r.content.decode()
    rid = r["X-Request-ID"]
    assert rid in error["message"] and error["details"] == [{"field": "X-Request-ID", "message": rid}]
    logged = "\n".join(caplog.text.splitlines())
    assert rid in logged and "Traceback" in logged and SECRET in logged


def test_the_callers_request_id_is_kept_and_a_bad_one_replaced(caplog: Any) -> None:
    client = Client(raise_request_exception=False)
    with override_settings(ROOT_URLCONF="tests.web.crash_urls"), caplog.at_level(logging.ERROR):
        kept = client.get("/api/v1/test/crash", HTTP_X_REQUEST_ID="edge-7f3a.42")
        replaced = client.get("/api/v1/test/crash", HTTP_X_REQUEST_ID="x\r\nSet-Cookie: a=b" + "z" * 200)
    assert kept["X-Request-ID"] == "edge-7f3a.42" and "edge-7f3a.42" in error_of(kept)["message"]
    assert "edge-7f3a.42" in caplog.text
    assert replaced["X-Request-ID"].isalnum() and "Set-Cookie" not in replaced.content.decode()
    assert client.get("/healthz")["X-Request-ID"]  # pages carry one too


def test_pages_outside_the_api_keep_djangos_pages() -> None:
    r = Client().get("/no-such-page")
    assert r.status_code == 404 and not r["Content-Type"].startswith("application/json")
