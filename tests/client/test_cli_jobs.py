"""``jigsaw jobs`` against a live server: submit and watch a job to the end, list, get, logs,
cancel and quota, as a user would type them."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from typing import Any

import pytest
from django.db import transaction

from tests.engine.builders import make_spec
from webapp.jobs.models import EventKind, Job, JobEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def append_log_lines(job_id: str, messages: Iterable[str]) -> None:
    """Log events as the engine's would arrive (the simulated engine writes none)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        for message in messages:
            job.last_event_seq += 1
            JobEvent.objects.create(
                job=job, seq=job.last_event_seq, kind=EventKind.LOG, data={"level": "info", "message": message}
            )
        Job.objects.filter(pk=job.pk).update(last_event_seq=job.last_event_seq)


def test_submit_watch_until_success_then_list_get_and_logs(jigsaw: Any, spec_file: Any, engine_speed: Any) -> None:
    engine_speed(40.0)  # about 20 s of simulated startup plus 3 short steps: a few wall seconds
    result = jigsaw("jobs", "submit", spec_file(make_spec(trainer={"total_steps": 3})), "--name", "slice", "--watch")

    assert result.code == 0, result.err
    lines = result.out.splitlines()
    job_id = re.match(r"submitted job (\S+) \(slice\): queued", lines[0]).group(1)  # type: ignore[union-attr]
    progress = [line.split("] ", 1)[1] for line in lines[1:-1]]
    statuses = [p.split()[0] for p in progress]
    assert [s for i, s in enumerate(statuses) if i == 0 or s != statuses[i - 1]] == [
        "queued",
        "starting",
        "running",
        "succeeded",
    ]
    assert [p for p in progress if p.startswith("running")][-1].startswith("running     step 3/3")
    assert lines[-1] == f"job {job_id} succeeded"

    listed = jigsaw("jobs", "list", "--status", "queued,running")
    assert listed.code == 0 and listed.out.strip() == "no jobs"
    listed = jigsaw("jobs", "list", "--status", "succeeded", "--json")
    assert [j["id"] for j in json.loads(listed.out)] == [job_id]
    table = jigsaw("jobs", "list").out.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATUS", "MODE", "STEP", "GPUS", "CREATED"]
    assert table[1].split()[:6] == [job_id, "slice", "succeeded", "simulated", "3/3", "2"]
    assert (
        table[-1]
        == "simulated: timings and throughput from the cost model; no weights, samples or rewards were produced"
    )

    shown = jigsaw("jobs", "get", job_id)
    assert shown.code == 0
    assert re.search(r"^status: +succeeded", shown.out, re.M) and re.search(r"^progress: +step 3/3$", shown.out, re.M)
    assert re.search(r"^mode: +simulated \(timings and throughput from the cost model; no weights", shown.out, re.M)
    as_json = json.loads(jigsaw("jobs", "get", job_id, "--json").out)
    assert as_json["progress"] == {"step": 3, "total_steps": 3} and as_json["engine_mode"] == "simulated"

    append_log_lines(job_id, ["loading qwen2.5-1.5b", "step 1 done"])
    logs = jigsaw("jobs", "logs", job_id)
    assert logs.code == 0
    assert [line.split(maxsplit=3)[2:] for line in logs.out.splitlines()] == [
        ["INFO", "loading qwen2.5-1.5b"],
        ["INFO", "step 1 done"],
    ]


def test_cancel_a_running_job_while_following_its_logs(jigsaw: Any, spec_file: Any, engine_speed: Any) -> None:
    engine_speed(1.0)  # real time: the job is still starting when it is cancelled
    submitted = jigsaw("jobs", "submit", spec_file(make_spec(), ".json"), "--json")
    assert submitted.code == 0, submitted.err
    job_id = json.loads(submitted.out)["id"]
    append_log_lines(job_id, ["warming up"])

    cancelled = jigsaw("jobs", "cancel", job_id)
    assert cancelled.code == 0
    assert cancelled.out.strip() == f"job {job_id}: cancelling (cancel requested)"

    started = time.monotonic()
    followed = jigsaw("jobs", "logs", job_id, "-f")  # returns once the engine has stopped it
    assert followed.code == 0 and followed.out.strip().split(maxsplit=3)[2:] == ["INFO", "warming up"]
    assert time.monotonic() - started < 20

    watched = jigsaw("jobs", "watch", job_id)
    assert watched.code == 1, "a cancelled job is not a success"
    assert watched.out.splitlines()[-1].startswith(f"job {job_id} cancelled")
    assert json.loads(jigsaw("jobs", "list", "--status", "cancelled", "--json").out)[0]["id"] == job_id

    again = jigsaw("jobs", "cancel", job_id)
    assert again.code == 1
    assert "nothing to cancel (invalid_state, HTTP 409)" in again.err


def test_quota_shows_limits_and_usage(jigsaw: Any) -> None:
    human = jigsaw("jobs", "quota")
    assert human.code == 0
    assert human.out.startswith("tenant acme on a cluster of ")
    assert re.search(r"^  guaranteed gpus: +h100=4$", human.out, re.M)
    assert re.search(r"^  queued jobs: +0$", human.out, re.M)

    report = json.loads(jigsaw("jobs", "quota", "--json").out)
    assert report["tenant"] == "acme"
    assert report["limits"]["max_queued_jobs"] == 5
    assert report["usage"]["gpus_held"] == 0
