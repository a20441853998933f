"""Logs a person can follow: one request id leads from the web request that submitted a job,
through the Celery tasks it caused (in the worker), and one job id through the engine events
stored for it; each line is one JSON object."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.django_fixtures import in_thread_worker
from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs import task_queue, tasks
from webapp.observability.logs import JsonFormatter, log_context

pytestmark = pytest.mark.django_db(transaction=True)


def as_json(record: logging.LogRecord) -> dict[str, object]:
    entry = json.loads(JsonFormatter().format(record))
    assert isinstance(entry, dict)
    return entry


def test_a_json_line_carries_the_ids_the_extras_and_the_traceback() -> None:
    logger = logging.getLogger("tests.logs")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        with log_context(request_id="req-1"), log_context(job_id="job-1"):
            try:
                raise ValueError("boom")
            except ValueError:
                logger.exception("it failed for %s", "a reason", extra={"route": "job-list"})
        logger.warning("outside")
    finally:
        logger.removeHandler(handler)
    inside, outside = (as_json(r) for r in records)
    assert inside["message"] == "it failed for a reason" and inside["level"] == "ERROR"
    assert (inside["request_id"], inside["job_id"], inside["route"]) == ("req-1", "job-1", "job-list")
    assert "ValueError: boom" in str(inside["exc"])
    assert "request_id" not in outside and "job_id" not in outside


@pytest.fixture()
def worker_without_beat(isolated_redis: None, transactional_db: None) -> Iterator[None]:
    """A real worker, in a thread, and no beat: every task it runs was caused by the test."""
    with in_thread_worker(beat=False):
        yield


def wait_for_record(
    caplog: pytest.LogCaptureFixture, message: str, job_id: str, timeout_s: float = 60
) -> logging.LogRecord:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for record in list(caplog.records):
            if record.getMessage().startswith(message) and getattr(record, "job_id", None) == job_id:
                return record
        time.sleep(0.05)
    raise AssertionError(f"no log line {message!r} for job {job_id} within {timeout_s}s")


def test_one_request_id_leads_from_the_submit_through_the_worker(
    make_actor, engine_speed, worker_without_beat, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_actor('acme').token}")
    # A create shares its admission pass with any other of the last second (an earlier test's):
    # this one must send its own, the pass this test follows.
    cache.delete(task_queue.ADMIT_SOON_KEY)
    created = client.post(
        "/api/v1/jobs",
        {"spec": make_spec()},
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        HTTP_X_REQUEST_ID="trace-42",
    )
    assert created.status_code == 201 and created["X-Request-ID"] == "trace-42"
    job_id = created.json()["id"]

    (access,) = [r for r in caplog.records if r.name == "webapp.requests" and getattr(r, "job_id", None) == job_id]
    assert as_json(access) | {"request_id": "trace-42", "job_id": job_id, "route": "job-list", "status": 201} == (
        as_json(access)
    )
    # The submit's admission pass ran in the worker under the request's id, and the dispatch it
    # sent carried the id on: the worker's line names both the request and the job.
    handed = wait_for_record(caplog, "job handed to the engine", job_id)
    assert handed.threadName != threading.current_thread().name
    assert as_json(handed)["request_id"] == "trace-42"

    deadline = time.monotonic() + 60
    while engine_gateway.pipeline_states().get(job_id) != "succeeded":
        assert time.monotonic() < deadline, "the engine did not finish the job"
        time.sleep(0.05)
    tasks.pump_engine_events()
    statuses = [as_json(r) for r in caplog.records if r.getMessage().startswith("engine status")]
    assert [s["message"].split()[2] for s in statuses if s.get("job_id") == job_id][-1] == "succeeded"
