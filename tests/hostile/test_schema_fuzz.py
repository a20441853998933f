"""Schemathesis against the served OpenAPI schema: every operation gets generated requests, valid
and deliberately invalid, sent through the real Django app (Postgres, Redis, the in-process
engine) with a tenant member's real token. No response may be a server error, and each must
match what the schema documents (status code, body, content type, headers).

Path parameters point at things that exist (a job, a dataset, an API key) most of the time, so
the fuzzing reaches the code behind the lookups rather than only their 404s. The admin routes
are fuzzed with a staff token holding the ``admin`` scope, for the same reason (a member gets a
403 there, covered in test_tokens.py).

The run is bounded (a few examples per operation, no shrinking) to stay within about a minute
on two cores; the number of generated cases goes to ``test-artifacts/hostile_cases.json`` for
the hardening report."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test.utils import override_settings
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.hostile.helpers import Targets, populate

pytestmark = pytest.mark.django_db(transaction=True)  # the app commits as it would in production

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
EXAMPLES_PER_OPERATION = 8
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    response_headers_conformance,
]


@pytest.fixture()
def fuzzing(make_actor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from webapp.jobs import task_queue

    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)  # no queue to feed: nothing consumes it
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        yield populate(make_actor)


def load_schema() -> Any:
    """The schema as ``/api/v1/schema`` serves it (the same generator), bound to the WSGI app."""
    document = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    # Server-Sent Events never end while the job runs: a response body cannot be read to its
    # end and checked. Its refusals (auth, foreign ids, bad Last-Event-ID) are plain JSON and
    # covered by tests/web; everything else is fuzzed.
    loaded = schemathesis.openapi.from_dict(document).exclude(path_regex=r"/events/stream/?$")
    loaded.app = get_wsgi_application()
    return loaded


def aim(case: Any, fuzzing: Targets) -> None:
    """Three cases in four name something that exists (chosen from the case itself, so the
    same cases aim the same way on every run)."""
    if case.path_parameters and sum(map(ord, json.dumps(case.path_parameters, default=str))) % 4:
        case.path_parameters = {k: fuzzing.real_ids.get(k, v) for k, v in case.path_parameters.items()}


def fuzz(operation: Any, mode: GenerationMode, token: str, fuzzing: Targets, generated: Counter[str]) -> None:
    """Run one operation's generated cases; raise on the first failing one."""
    label = f"{operation.method.upper()} {operation.path}"

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        phases=[Phase.generate],  # no shrinking: a failure reports its case as found
        suppress_health_check=list(HealthCheck),
        derandomize=True,  # the same cases on every run: a failure here reproduces
        database=None,
    )
    def run(case: Any) -> None:
        aim(case, fuzzing)
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        generated[label] += 1
        case.validate_response(response, checks=CHECKS)

    run()


def test_no_operation_errors_or_breaks_its_schema(fuzzing: Targets) -> None:
    """One test drives every operation with Hypothesis itself: Schemathesis' pytest plugin
    (``parametrize``) fails under pytest 9 (it reads ``request.node._nodeid``), and one test
    pays the database set-up once rather than per operation."""
    started = time.monotonic()
    failures: list[str] = []
    generated: Counter[str] = Counter()
    seconds: dict[str, float] = {}
    operations = 0
    for result in load_schema().get_all_operations():
        operation = result.ok()
        operations += 1
        token = fuzzing.admin_token if operation.path.startswith("/api/v1/admin/") else fuzzing.member.token
        began = time.monotonic()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                fuzz(operation, mode, token, fuzzing, generated)
            except (Exception, BaseExceptionGroup) as exc:  # every operation runs; failures reported together
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {brief(exc)}")
        seconds[f"{operation.method.upper()} {operation.path}"] = round(time.monotonic() - began, 2)
    assert operations >= 30, "the schema lost its operations"
    record(generated, seconds, time.monotonic() - started)
    assert not failures, "\n\n".join(failures)


def brief(exc: BaseException) -> str:
    """A failure in a few lines: the check's verdict and the case to reproduce it."""
    if isinstance(exc, BaseExceptionGroup):
        return "\n  ".join(brief(e) for e in exc.exceptions)
    lines = [line for line in str(exc).splitlines() if line.strip()]
    reproduce = [line for line in lines if "curl" in line]
    return " | ".join(lines[:4] + reproduce[:1])


def record(generated: Counter[str], seconds: dict[str, float], total_s: float) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    report = {
        "generated_cases": sum(generated.values()),
        "operations": len(generated),
        "by_operation": {label: {"cases": n, "seconds": seconds.get(label)} for label, n in sorted(generated.items())},
        "examples_per_operation_and_mode": EXAMPLES_PER_OPERATION,
        "seconds": round(total_s, 1),
    }
    (ARTIFACTS / "hostile_cases.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nschemathesis: {report['generated_cases']} generated cases over {report['operations']} operations")
