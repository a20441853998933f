"""What the API does not understand is refused by name, never dropped: an unknown body field or
query parameter, a bad cursor, page size or format is a 400 in the one error shape naming it
(with the closest known name, as for an unknown field inside a spec), on every operation of
/api/v1, and the request changes nothing."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.utils import override_settings
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tenants.models import ApiToken, Membership, Quota, Tenant
from tests.engine.builders import make_spec
from tests.hostile.helpers import ROWS, client_for, error_of, populate, submit
from webapp.datasets.models import Dataset
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class World:
    member: APIClient
    admin: APIClient
    ids: dict[str, str]


@pytest.fixture()
def world(make_actor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from webapp.jobs import task_queue

    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)  # jobs stay queued
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        targets = populate(make_actor)
        yield World(client_for(targets.member.token), client_for(targets.admin_token), targets.real_ids)


def state() -> Any:
    """What a write could change, to check that a refused one changed nothing."""
    return (
        list(Job.objects.order_by("pk").values_list("name", "status", "tags", "priority")),
        list(Dataset.objects.order_by("pk").values_list("name", flat=True)),
        list(ApiToken.objects.order_by("pk").values_list("name", "revoked_at")),
        list(Tenant.objects.order_by("pk").values_list("slug", flat=True)),
        [q.max_gpus_per_job for q in Quota.objects.order_by("pk")],
        list(Membership.objects.order_by("pk").values_list("tenant__slug", "user__username", "role")),
    )


def details(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 400, response.content
    error = error_of(response)
    assert error["code"] == "validation_error", error
    return list(error["details"])


# -- unknown body fields ------------------------------------------------------------------------
def test_an_unknown_field_beside_the_spec_is_refused_like_one_inside_it(world: World) -> None:
    key = str(uuid.uuid4())
    sent = {"name": "big", "spec": make_spec(), "gpus": 64}
    r = world.member.post("/api/v1/jobs", sent, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert details(r) == [{"field": "gpus", "message": "unknown field; known fields: name, spec"}]
    assert not Job.objects.filter(name="big").exists()
    # The refusal is not remembered under the key: the corrected request goes through.
    del sent["gpus"]
    assert world.member.post("/api/v1/jobs", sent, format="json", HTTP_IDEMPOTENCY_KEY=key).status_code == 201

    # A spec field sent beside the spec is pointed to where it belongs.
    r = submit(world.member, {"spec": make_spec(), "priority": 4, "nmae": "x"})
    assert details(r) == [
        {"field": "priority", "message": "unknown field; did you mean 'spec.priority'?"},
        {"field": "nmae", "message": "unknown field; did you mean 'name'?"},
    ]
    # The same shape as inside the spec.
    inside = details(submit(world.member, {"spec": {**make_spec(), "prioriti": 4}}))
    assert inside == [{"field": "spec.prioriti", "message": "unknown field; did you mean 'priority'?"}]


BODIES = [
    ("patch", "/api/v1/jobs/{id}", {"tag": ["a"]}, {"tag": "unknown field; did you mean 'tags'?"}),
    ("post", "/api/v1/jobs/{id}/clone", {"override": {}}, {"override": "unknown field; did you mean 'overrides'?"}),
    ("post", "/api/v1/jobs/{id}/cancel", {"reason": "x"}, {"reason": "unknown field; this request takes no fields"}),
    ("post", "/api/v1/jobs/{id}/pause", {"now": True}, {"now": "unknown field; this request takes no fields"}),
    ("post", "/api/v1/jobs/{id}/resume", {"now": True}, {"now": "unknown field; this request takes no fields"}),
    (
        "post",
        "/api/v1/api-keys",
        {"name": "k", "scope": ["jobs:read"]},
        {"scopes": "This field is required.", "scope": "unknown field; did you mean 'scopes'?"},
    ),
    (
        "post",
        "/api/v1/datasets",
        {"name": "d2", "content": ROWS, "grader": "numeric"},
        {"grader": "unknown field; known fields: content, name"},
    ),
    (
        "post",
        "/api/v1/graders/dry-run",
        {"grader": "numeric", "rows": [{"prompt": "q", "answer": "1", "reward": 1.0}]},
        {"rows[0].reward": "unknown field; known fields: answer, prompt"},
    ),
    (
        "post",
        "/api/v1/admin/tenants",
        {"slug": "new", "name": "New", "quota": {"max_gpu_per_job": 4}},
        {"quota.max_gpu_per_job": "unknown field; did you mean 'max_gpus_per_job'?"},
    ),
    (
        "patch",
        "/api/v1/admin/tenants/{slug}/quota",
        {"max_gpu_per_job": 4, "max_running_jobs": -1},
        {
            "max_running_jobs": "Ensure this value is greater than or equal to 0.",
            "max_gpu_per_job": "unknown field; did you mean 'max_gpus_per_job'?",
        },
    ),
    (
        "put",
        "/api/v1/admin/tenants/{slug}/members/{username}",
        {"role": "member", "roles": ["owner"]},
        {"roles": "unknown field; did you mean 'role'?"},
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "expected"), BODIES, ids=[f"{m} {p}" for m, p, *_ in BODIES])
def test_every_write_refuses_unknown_fields_and_changes_nothing(
    world: World, method: str, path: str, body: dict[str, Any], expected: dict[str, str]
) -> None:
    client = world.admin if "/admin/" in path else world.member
    before = state()
    r = getattr(client, method)(path.format(**world.ids), body, format="json")
    assert {d["field"]: d["message"] for d in details(r)} == expected
    assert state() == before


def test_a_multipart_upload_refuses_unknown_fields(world: World) -> None:
    upload = SimpleUploadedFile("d3.jsonl", ROWS.encode())
    r = world.member.post("/api/v1/datasets", {"file": upload, "grader": "numeric"}, format="multipart")
    assert details(r) == [{"field": "grader", "message": "unknown field; known fields: file, name"}]
    assert not Dataset.objects.filter(name="d3").exists()


# -- query parameters ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        (
            "cursor=garbage",
            "cursor",
            "is not a cursor this list gave out; follow the next and previous links as they are",
        ),
        # Well formed, but its position is no timestamp: refused, not a server error.
        (
            "cursor=" + base64.b64encode(b"p=garbage").decode(),
            "cursor",
            "is not a cursor this list gave out; follow the next and previous links as they are",
        ),
        ("page_size=-1", "page_size", "must be between 1 and 200, got -1"),
        ("page_size=0", "page_size", "must be between 1 and 200, got 0"),
        ("page_size=abc", "page_size", "must be an integer, got 'abc'"),
        ("page_size=500", "page_size", "must be between 1 and 200, got 500"),
        ("state=queued", "state", "unknown query parameter; did you mean 'status'?"),
        (
            "ordering=name",
            "ordering",
            "unknown query parameter; known query parameters: cursor, name, page_size, status, tag",
        ),
        ("format=xml", "format", "must be one of json, api; got 'xml'"),
    ],
)
def test_a_bad_list_query_is_a_400_naming_the_parameter(world: World, query: str, field: str, message: str) -> None:
    assert details(world.member.get(f"/api/v1/jobs?{query}")) == [{"field": field, "message": message}]


def test_paging_with_the_links_still_works(world: World) -> None:
    submit(world.member, {"name": "second", "spec": make_spec()})
    first = world.member.get("/api/v1/jobs?page_size=1&status=queued").json()
    second = world.member.get(first["next"]).json()
    assert [j["name"] for j in first["results"] + second["results"]] == ["second", "target"]


def test_a_bad_query_on_a_job_names_the_parameter(world: World) -> None:
    job = f"/api/v1/jobs/{world.ids['id']}"
    assert details(world.member.get(f"{job}/metrics?format=xml")) == [
        {"field": "format", "message": "must be one of json, api, csv; got 'xml'"}
    ]
    assert world.member.get(f"{job}/metrics?format=csv")["Content-Type"].startswith("text/csv")
    assert details(world.member.get(f"{job}/logs?afterr=3")) == [
        {"field": "afterr", "message": "unknown query parameter; did you mean 'after'?"}
    ]
    assert details(world.member.get(f"{job}/metrics?max_point=5")) == [
        {"field": "max_point", "message": "unknown query parameter; did you mean 'max_points'?"}
    ]


@pytest.mark.parametrize(
    ("query", "headers", "field", "message"),
    [
        ("after=abc", {}, "after", "must be an integer, got 'abc'"),
        ("after=-5", {}, "after", "must be >= 0, got -5"),
        ("", {"HTTP_LAST_EVENT_ID": "abc"}, "Last-Event-ID", "must be an integer event seq >= 0, got 'abc'"),
        ("", {"HTTP_LAST_EVENT_ID": "-5"}, "Last-Event-ID", "must be an integer event seq >= 0, got '-5'"),
        ("aftr=3", {}, "aftr", "unknown query parameter; did you mean 'after'?"),
    ],
)
def test_the_event_stream_names_the_bad_parameter_the_client_sent(
    world: World, query: str, headers: dict[str, str], field: str, message: str
) -> None:
    path = f"/api/v1/jobs/{world.ids['id']}/events/stream?{query}"
    r = world.member.get(path, HTTP_ACCEPT="text/event-stream", **headers)
    assert details(r) == [{"field": field, "message": message}]


def test_an_audit_filter_naming_no_tenant_is_refused(world: World) -> None:
    assert details(world.admin.get("/api/v1/admin/audit?tenant=nope")) == [
        {"field": "tenant", "message": "no tenant 'nope'"}
    ]
    assert world.admin.get(f"/api/v1/admin/audit?tenant={world.ids['slug']}").status_code == 200
    assert details(world.admin.get("/api/v1/admin/audit?page_size=0")) == [
        {"field": "page_size", "message": "must be between 1 and 200, got 0"}
    ]


def test_every_operation_refuses_a_query_parameter_it_does_not_take(world: World) -> None:
    """Walked from the schema, so a new operation is checked too; refused before it acts."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    before = state()
    wrong = []
    # Webhooks need the admin scope; the query is checked before the endpoint (or the
    # checkpoint) is looked up.
    ids = {**world.ids, "endpoint_id": str(uuid.uuid4()), "step": "1"}
    for path, operations in schema["paths"].items():
        for method in operations:
            admin_only = path.startswith(("/api/v1/admin/", "/api/v1/webhooks"))
            client = world.admin if admin_only else world.member
            url = path.replace("{", "{0[").replace("}", "]}").format(ids) + "?bogus=1"
            r = client.generic(method.upper(), url, "{}", content_type="application/json")
            found = r.json()["error"]["details"] if r.status_code == 400 else r.status_code
            if not isinstance(found, list) or [d["field"] for d in found] != ["bogus"]:
                wrong.append(f"{method.upper()} {path}: {found}")
    assert not wrong, "\n".join(wrong)
    assert state() == before
