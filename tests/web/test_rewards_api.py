"""``GET /api/v1/rewards``: the rewards a tenant may choose (built-in and the operator's), a spec
naming any other refused with the list, and a failed reward's reason in the job's samples."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from tests.reward_plugin import INSTALLED, operator_rewards
from webapp.jobs.models import EventKind, Job, JobEvent

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["operator_rewards"]  # the fixture: the test rewards installed where this process finds them


def _client(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def test_the_built_in_graders_and_the_operators_rewards_are_listed(make_actor: Any, operator_rewards: Path) -> None:
    c = _client(make_actor("acme").token)
    r = c.get("/api/v1/rewards")
    assert r.status_code == 200
    rewards = r.json()["results"]
    assert [x["name"] for x in rewards] == ["exact_match", "numeric", "math", *INSTALLED]
    slow = next(x for x in rewards if x["name"] == "slow")
    assert slow == {
        "name": "slow",
        "description": "sleeps past its limit",
        "suits": "nothing",
        "time_limit_s": 0.3,
        "builtin": False,
        "source": "jigsaw_test_rewards:slow (jigsaw_test_rewards 0.1)",
    }
    assert rewards[1]["builtin"] is True and rewards[1]["time_limit_s"] is None
    assert APIClient().get("/api/v1/rewards").status_code in (401, 403)
    assert c.get("/api/v1/rewards?kind=x").status_code == 400  # no query parameters


def test_a_spec_chooses_an_installed_reward_or_is_refused_with_the_list(
    make_actor: Any, operator_rewards: Path
) -> None:
    c = _client(make_actor("acme").token)
    chosen = c.post("/api/v1/jobs/estimate", {"spec": make_spec(data={"grader": "contains_reference"})}, format="json")
    assert chosen.status_code == 200, chosen.content
    r = c.post(
        "/api/v1/jobs",
        {"spec": make_spec(data={"grader": "import os; os.system('x')"})},
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    assert r.status_code == 400
    [detail] = r.json()["error"]["details"]
    assert detail["field"] == "spec.data.grader"
    assert detail["message"].startswith("unknown reward \"import os; os.system('x')\"; installed rewards: exact_match,")
    assert "contains_reference" in detail["message"] and "GET /api/v1/rewards" in detail["message"]
    assert not Job.objects.exists()


def test_a_samples_reward_error_is_shown_and_older_samples_read_as_scored(make_actor: Any) -> None:
    actor = make_actor("acme")
    c = _client(actor.token)
    job_id = c.post(
        "/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    ).json()["id"]
    sample = {"prompt": "Compute 1+2.", "completion": "#### 3", "answer": "3", "reward": 0.0, "turns": 1}
    failed = {**sample, "reward_error": "reward 'moody' raised ValueError: cannot read this reply"}
    JobEvent.objects.create(job_id=job_id, seq=10_001, kind=EventKind.SAMPLES, data={"step": 1, "samples": [sample]})
    JobEvent.objects.create(job_id=job_id, seq=10_002, kind=EventKind.SAMPLES, data={"step": 2, "samples": [failed]})
    results = c.get(f"/api/v1/jobs/{job_id}/samples").json()["results"]
    assert [(s["step"], s["reward_error"]) for s in results] == [
        (2, "reward 'moody' raised ValueError: cannot read this reply"),
        (1, ""),
    ]


def test_a_samples_response_tokens_are_given_and_older_samples_read_null(make_actor: Any) -> None:
    c = _client(make_actor("acme").token)
    job_id = c.post(
        "/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    ).json()["id"]
    older = {"prompt": "Compute 1+2.", "completion": "#### 3", "answer": "3", "reward": 1.0, "turns": 1}
    JobEvent.objects.create(job_id=job_id, seq=10_001, kind=EventKind.SAMPLES, data={"step": 1, "samples": [older]})
    newer = {**older, "response_tokens": 7}
    JobEvent.objects.create(job_id=job_id, seq=10_002, kind=EventKind.SAMPLES, data={"step": 2, "samples": [newer]})
    results = c.get(f"/api/v1/jobs/{job_id}/samples").json()["results"]
    assert [(s["step"], s["response_tokens"]) for s in results] == [(2, 7), (1, None)]


def test_a_dry_run_scores_with_an_installed_reward_and_says_why_one_failed(
    make_actor: Any, operator_rewards: Path
) -> None:
    c = _client(make_actor("acme").token)
    rows = [{"prompt": "Compute 1+2.", "answer": "3"}]
    r = c.post("/api/v1/graders/dry-run", {"grader": "contains_reference", "rows": rows}, format="json")
    assert r.status_code == 200, r.content
    [scored] = r.json()["results"]
    assert (scored["reward"], scored["reward_error"]) == (1.0, "")
    r = c.post("/api/v1/graders/dry-run", {"grader": "raises", "rows": rows}, format="json")
    [failed] = r.json()["results"]
    assert (failed["reward"], failed["reward_error"]) == (
        0.0,
        "reward 'raises' raised ValueError: cannot read this reply",
    )
