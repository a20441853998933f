"""``jigsaw jobs submit --estimate`` and ``JigsawClient.estimate_job`` against a live server: what
a job would take, cost and wait, printed, with nothing submitted."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from jigsaw_client import ApiError, JigsawClient
from jigsaw_client.estimates import duration_text
from tenants.models import Quota
from tests.engine.builders import make_spec
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_estimate_prints_the_forecast_and_submits_nothing(jigsaw: Any, spec_file: Any) -> None:
    path = spec_file(make_spec(trainer={"total_steps": 20}))
    shown = jigsaw("jobs", "submit", path, "--estimate")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == "estimate (nothing submitted):"
    assert re.search(r"^  per step: +\d+\.\d s$", shown.out, re.M)
    assert re.search(r"^  total: +.* for 20 steps, from admission$", shown.out, re.M)
    assert re.search(r"^  GPUs: +2 h100$", shown.out, re.M)
    assert re.search(r"^  cost: +\d+\.\d\d USD at 2\.5 per GPU-hour \(the service's price\)$", shown.out, re.M)
    assert re.search(r"^  queue wait: +none \(8 GPUs free, 0 jobs ahead\)$", shown.out, re.M)
    assert re.search(r"^  blocked: +no$", shown.out, re.M)
    assert Job.objects.count() == 0

    as_json = json.loads(jigsaw("jobs", "submit", path, "--estimate", "--json").out)
    assert as_json["steps"] == 20 and as_json["blocked"] is False
    assert f"{as_json['gpu_hours']:.2f}" in shown.out
    assert Job.objects.count() == 0


def test_a_blocked_estimate_says_why_and_exits_1(jigsaw: Any, spec_file: Any, actor: Any) -> None:
    Quota.objects.filter(tenant=actor.tenant).update(max_gpus_per_job=4)
    shown = jigsaw("jobs", "submit", spec_file(make_spec(resources={"num_gpus": 8})), "--estimate")
    assert shown.code == 1
    assert re.search(r"^  blocked: +yes$", shown.out, re.M)
    assert "    quota (spec.resources.num_gpus): 8 GPUs; your tenant's limit per job is 4" in shown.out


def test_a_bad_spec_is_refused_as_a_submit_is(jigsaw: Any, spec_file: Any) -> None:
    shown = jigsaw("jobs", "submit", spec_file(make_spec(rollout={"n": 0})), "--estimate")
    assert shown.code == 1
    assert "error: the job spec is invalid (validation_error, HTTP 400)" in shown.err
    assert "  spec.rollout.n: must be >= 1, got 0" in shown.err


def test_the_client_method(live_server_url: str, actor: Any) -> None:
    with JigsawClient(live_server_url, actor.token) as client:
        short = client.estimate_job(make_spec(trainer={"total_steps": 10}))
        long = client.estimate_job(make_spec(trainer={"total_steps": 30}))
        assert long["total_s"] == pytest.approx(short["total_s"] + 20 * short["step_s"], rel=1e-6)
        assert short["cost"]["currency"] == "USD" and short["queue"]["wait_s"] == 0
        assert short["record"] is None and short["idle_cluster"]["total_s"] < short["total_s"]
        with pytest.raises(ApiError) as refused:
            client.estimate_job({"model": "no-such-model"})
        queued = client.submit_job(make_spec())
        with pytest.raises(ApiError) as running:
            client.job_accuracy(queued["id"])
    assert refused.value.status == 400 and refused.value.details[0]["field"].startswith("spec.")
    assert running.value.status == 409 and running.value.code == "invalid_state"
    assert Job.objects.count() == 1  # the one submitted; estimates create none


def test_durations_read_as_people_say_them() -> None:
    assert duration_text(7.06) == "7.1 s"
    assert duration_text(163.4) == "2 min 43 s"
    assert duration_text(5073.5) == "1 h 24 min"
    assert duration_text(2 * 86400 + 4 * 3600 + 100) == "2 d 4 h"
