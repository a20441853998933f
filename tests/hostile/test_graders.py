"""Reward graders are declarative: a spec or a dry run names one of the engine's graders, and
anything else (code, an import path, a callable's source, a structure) is refused with the
field and the list of names. No user text is ever run, so there is nothing to sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test.utils import override_settings

from tests.engine.builders import make_spec
from tests.hostile.helpers import client_for, error_of, submit
from webapp import engine_gateway
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db

ROWS = "\n".join(json.dumps({"prompt": f"What is {i}+{i}?", "answer": str(2 * i)}) for i in range(3))


def hostile_graders(marker: Path) -> list[Any]:
    return [
        f"__import__('os').system('touch {marker}')",
        "lambda reply, reference: 1.0",
        "jigsaw_engine.envs.graders.grade_numeric",
        "os.system",
        "python",
        "../numeric",
        {"code": f"open('{marker}', 'w')"},
        ["numeric"],
        1,
    ]


@pytest.fixture()
def marker(tmp_path: Path) -> Iterator[Path]:
    """A file that only running user-supplied code would create."""
    path = tmp_path / "pwned"
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        yield path
    assert not path.exists(), "a grader's text was executed"


def test_the_engine_offers_named_graders_only() -> None:
    assert engine_gateway.grader_names() == ["exact_match", "numeric", "math"]


def test_a_spec_naming_anything_but_a_named_grader_is_refused(make_actor: Any, marker: Path) -> None:
    client = client_for(make_actor("acme").token)
    assert client.post("/api/v1/datasets", {"name": "math", "content": ROWS}, format="json").status_code == 201
    for grader in hostile_graders(marker):
        r = submit(client, {"spec": make_spec(data={"train_files": "dataset:math", "grader": grader})})
        assert r.status_code == 400, (grader, r.content)
        detail = error_of(r)["details"][0]
        assert detail["field"] == "spec.data.grader", grader
        assert "exact_match" in detail["message"] and "numeric" in detail["message"], detail
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"reward_fn": "lambda r, a: 1.0"}, "spec.data.reward_fn"),
        ({"grader_code": "return 1.0"}, "spec.data.grader_code"),
        ({"reward": {"module": "os", "function": "system"}}, "spec.data.reward"),
    ],
)
def test_a_spec_cannot_smuggle_a_reward_function_under_another_key(
    make_actor: Any, marker: Path, data: dict[str, Any], field: str
) -> None:
    r = submit(client_for(make_actor("acme").token), {"spec": make_spec(data=data)})
    assert r.status_code == 400
    assert field in {d["field"] for d in error_of(r)["details"]}


def test_a_dry_run_grades_only_with_a_named_grader(make_actor: Any, marker: Path) -> None:
    client = client_for(make_actor("acme").token)
    rows = [{"prompt": "1+1?", "answer": "2"}]
    for grader in hostile_graders(marker):
        r = client.post("/api/v1/graders/dry-run", {"grader": grader, "rows": rows}, format="json")
        assert r.status_code == 400, (grader, r.content)
        detail = error_of(r)["details"][0]
        assert detail["field"] == "grader", grader
    ok = client.post("/api/v1/graders/dry-run", {"grader": "numeric", "rows": rows}, format="json")
    assert ok.status_code == 200 and ok.json()["results"][0]["reward"] == 1.0
