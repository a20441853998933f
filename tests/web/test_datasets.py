"""Datasets: upload a JSONL file (every row checked by the engine, bad ones named by line),
list/show/delete it within the tenant only, dry-run a grader on its rows, and submit a job
that names it as ``data.train_files: "dataset:<name>"``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.utils import override_settings
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_path
from webapp.jobs.models import Job
from webapp.jobs.selectors import engine_spec

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = "\n".join(
    json.dumps(row)
    for row in [
        {"prompt": "What is 2+2?", "answer": "4"},
        {"prompt": "What is 10*3?", "answer": "30"},
        {"prompt": "Half of 9?", "answer": "4.5"},
    ]
)


@pytest.fixture(autouse=True)
def datasets_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "datasets"
    with override_settings(DATASETS_DIR=str(root)):
        yield root


def client_for(actor: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
    return client


def upload(client: APIClient, name: str, content: str) -> Any:
    return client.post("/api/v1/datasets", {"name": name, "content": content}, format="json")


def submit(client: APIClient, spec: dict[str, Any]) -> Any:
    return client.post("/api/v1/jobs", {"spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))


def test_upload_list_show_delete(make_actor: Any, datasets_dir: Path) -> None:
    actor = make_actor("acme")
    client = client_for(actor)
    r = upload(client, "math-small", GOOD)
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["name"] == "math-small" and body["rows"] == 3 and body["ref"] == "dataset:math-small"
    assert body["size_bytes"] == len(GOOD.encode()) and len(body["sha256"]) == 64
    assert body["created_by"] == actor.user.username
    dataset = Dataset.objects.get(tenant=actor.tenant, name="math-small")
    stored = datasets_dir.resolve() / str(actor.tenant.pk) / f"{dataset.pk}.jsonl"
    assert stored.read_text() == GOOD

    assert [d["name"] for d in client.get("/api/v1/datasets").json()["results"]] == ["math-small"]
    detail = client.get("/api/v1/datasets/math-small").json()
    assert detail["rows"] == 3
    assert detail["preview"][0] == {"line": 1, "prompt": "What is 2+2?", "answer": "4"}
    assert len(detail["preview"]) == 3

    assert upload(client, "math-small", GOOD).status_code == 409  # names are unique per tenant

    assert client.delete("/api/v1/datasets/math-small").status_code == 204
    assert not stored.exists()
    assert client.get("/api/v1/datasets/math-small").status_code == 404


def test_multipart_upload_takes_the_name_from_the_file(make_actor: Any) -> None:
    client = client_for(make_actor("acme"))
    f = SimpleUploadedFile("gsm8k-mini.jsonl", GOOD.encode(), content_type="application/jsonl")
    r = client.post("/api/v1/datasets", {"file": f}, format="multipart")
    assert r.status_code == 201, r.content
    assert r.json()["name"] == "gsm8k-mini" and r.json()["rows"] == 3


def test_bad_rows_are_named_by_line_and_nothing_is_stored(make_actor: Any, datasets_dir: Path) -> None:
    client = client_for(make_actor("acme"))
    content = "\n".join(
        [
            json.dumps({"prompt": "a", "answer": "1"}),
            json.dumps({"prompt": "b", "answer": "2"}),
            json.dumps({"prompt": "c"}),
            "{not json",
            json.dumps({"prompt": "e", "answer": 5}),
        ]
    )
    r = upload(client, "broken", content)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "dataset_invalid"
    assert "3 bad lines" in error["message"]
    by_field = {d["field"]: d["message"] for d in error["details"]}
    assert by_field["rows[3]"] == 'line 3: missing field "answer"'
    assert by_field["rows[4]"].startswith("line 4: not valid JSON")
    assert by_field["rows[5]"].startswith('line 5: field "answer" must be a string')
    assert not Dataset.objects.exists()
    assert not any(p.is_file() for p in datasets_dir.rglob("*"))


def test_at_most_fifty_problems_are_listed_with_the_total(make_actor: Any) -> None:
    client = client_for(make_actor("acme"))
    r = upload(client, "junk", "\n".join(["nope"] * 73))
    error = r.json()["error"]
    assert r.status_code == 400 and "73 bad lines (the first 50 listed)" in error["message"]
    assert len(error["details"]) == 51 and error["details"][-1]["message"] == "and 23 more bad lines"


def test_empty_file_is_refused(make_actor: Any) -> None:
    r = upload(client_for(make_actor("acme")), "empty", "\n\n")
    assert r.status_code == 400 and "no rows" in r.json()["error"]["details"][0]["message"]


def test_too_large_is_refused(make_actor: Any) -> None:
    client = client_for(make_actor("acme"))
    with override_settings(DATASET_MAX_BYTES=100):
        r = upload(client, "big", GOOD)
        assert r.status_code == 413
        assert "at most 100 bytes" in r.json()["error"]["message"]
        f = SimpleUploadedFile("big.jsonl", GOOD.encode())
        assert client.post("/api/v1/datasets", {"file": f}, format="multipart").status_code == 413
    with override_settings(DATASET_MAX_ROWS=2):
        r = upload(client, "many", GOOD)
        assert r.status_code == 413 and "the limit is 2" in r.json()["error"]["message"]
    assert not Dataset.objects.exists()


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".hidden", "/etc/passwd", "a\\b", "", "x" * 101, "a b"])
def test_path_traversal_and_bad_names_are_refused(make_actor: Any, datasets_dir: Path, name: str) -> None:
    r = upload(client_for(make_actor("acme")), name, GOOD)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["details"][0]["field"] == "name"
    assert not Dataset.objects.exists()
    assert not datasets_dir.exists() or not any(p.is_file() for p in datasets_dir.rglob("*"))


def test_multipart_file_name_cannot_traverse(make_actor: Any, datasets_dir: Path) -> None:
    client = client_for(make_actor("acme"))
    f = SimpleUploadedFile("x.jsonl", GOOD.encode())
    r = client.post("/api/v1/datasets", {"file": f, "name": "../../etc/x"}, format="multipart")
    assert r.status_code == 400 and not Dataset.objects.exists()


def test_another_tenant_cannot_see_delete_or_use_a_dataset(make_actor: Any) -> None:
    a, b = make_actor("acme"), make_actor("globex")
    owner, other = client_for(a), client_for(b)
    assert upload(owner, "secret", GOOD).status_code == 201
    assert other.get("/api/v1/datasets/secret").status_code == 404
    assert other.delete("/api/v1/datasets/secret").status_code == 404
    assert other.get("/api/v1/datasets").json()["results"] == []
    r = other.post("/api/v1/graders/dry-run", {"grader": "numeric", "dataset": "secret"}, format="json")
    assert r.status_code == 400
    r = submit(other, make_spec(data={"train_files": "dataset:secret"}))
    assert r.status_code == 400
    assert r.json()["error"]["details"] == [
        {
            "field": "spec.data.train_files",
            "message": "no dataset named 'secret'; upload it first (POST /api/v1/datasets)",
        }
    ]
    # Nor by the stored file's path: only "dataset:<name>" (or one's own stored path) is accepted.
    stored = dataset_path(Dataset.objects.get(name="secret"))
    r = submit(other, make_spec(data={"train_files": str(stored)}))
    assert r.status_code == 400 and "dataset:<name>" in r.json()["error"]["details"][0]["message"]
    assert Dataset.objects.filter(tenant=a.tenant, name="secret").exists()
    assert not Job.objects.exists()


@pytest.mark.parametrize("value", ["/etc/passwd", "../../var/datasets/x.jsonl", "relative.jsonl"])
def test_arbitrary_paths_are_refused_in_a_job_spec(make_actor: Any, value: str) -> None:
    r = submit(client_for(make_actor("acme")), make_spec(data={"train_files": value}))
    assert r.status_code == 400
    assert r.json()["error"]["details"][0]["field"] == "spec.data.train_files"
    assert 'must be "dataset:<name>"' in r.json()["error"]["details"][0]["message"]


def test_dry_run_rewards(make_actor: Any) -> None:
    client = client_for(make_actor("acme"))
    assert upload(client, "math", GOOD).status_code == 201
    r = client.post("/api/v1/graders/dry-run", {"grader": "numeric", "dataset": "math"}, format="json")
    assert r.status_code == 200, r.content
    results = r.json()["results"]
    assert [x["reward"] for x in results] == [1.0, 1.0, 1.0]
    assert results[0] == {
        "line": 1,
        "prompt": "What is 2+2?",
        "answer": "4",
        "completion": "#### 4",
        "reward": 1.0,
        "reward_error": "",
        "problem": None,
    }
    r = client.post(
        "/api/v1/graders/dry-run",
        {"grader": "numeric", "dataset": "math", "completions": ["so #### 4", "#### 31"]},
        format="json",
    )
    assert [x["reward"] for x in r.json()["results"]] == [1.0, 0.0, 1.0]

    rows = [{"prompt": "Capital of France?", "answer": "Paris"}, {"prompt": "Colour of the sky?", "answer": "blue"}]
    r = client.post(
        "/api/v1/graders/dry-run",
        {"grader": "exact_match", "rows": rows, "completions": ["#### paris.", "#### green"]},
        format="json",
    )
    assert [(x["line"], x["reward"]) for x in r.json()["results"]] == [(1, 1.0), (2, 0.0)]
    # The numeric grader can never reward a word answer: the row says so.
    r = client.post("/api/v1/graders/dry-run", {"grader": "numeric", "rows": rows}, format="json")
    assert r.json()["results"][0]["reward"] == 0.0 and "not a number" in r.json()["results"][0]["problem"]


def test_dry_run_input_errors(make_actor: Any) -> None:
    client = client_for(make_actor("acme"))
    r = client.post(
        "/api/v1/graders/dry-run", {"grader": "fuzzy", "rows": [{"prompt": "p", "answer": "1"}]}, format="json"
    )
    assert r.status_code == 400 and r.json()["error"]["details"][0]["field"] == "grader"
    r = client.post("/api/v1/graders/dry-run", {"grader": "numeric"}, format="json")
    assert r.status_code == 400 and r.json()["error"]["details"][0]["field"] == "dataset"
    r = client.post("/api/v1/graders/dry-run", {"grader": "numeric", "dataset": "nope"}, format="json")
    assert r.status_code == 400 and "no dataset named 'nope'" in r.json()["error"]["message"]


def test_submit_with_a_dataset_gives_the_engine_the_stored_path(make_actor: Any, datasets_dir: Path) -> None:
    actor = make_actor("acme")
    client = client_for(actor)
    assert upload(client, "math", GOOD).status_code == 201
    r = submit(client, make_spec(data={"train_files": "dataset:math", "grader": "numeric"}))
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    dataset = Dataset.objects.get(tenant=actor.tenant, name="math")
    expected = str(datasets_dir.resolve() / str(actor.tenant.pk) / f"{dataset.pk}.jsonl")
    assert job.resolved_spec["data"]["train_files"] == expected
    assert job.resolved_spec["data"]["grader"] == "numeric"
    assert engine_spec(job)["data"]["train_files"] == expected  # what the engine is handed
    assert Path(expected).read_text() == GOOD
    # An unfinished job reads it: it cannot be deleted from under the job.
    assert client.delete("/api/v1/datasets/math").status_code == 409
    # A clone keeps the same (own) stored path.
    r = client.post(f"/api/v1/jobs/{job.pk}/clone", {"checkpoint_step": 0}, format="json")
    assert r.status_code == 201, r.content
    assert Job.objects.get(pk=r.json()["id"]).resolved_spec["data"]["train_files"] == expected


def test_submit_refuses_a_dataset_the_grader_cannot_match(make_actor: Any) -> None:
    client = client_for(make_actor("acme"))
    words = "\n".join(json.dumps({"prompt": f"q{i}", "answer": w}) for i, w in enumerate(["Paris", "12", "blue"]))
    assert upload(client, "words", words).status_code == 201
    r = submit(client, make_spec(data={"train_files": "dataset:words", "grader": "numeric"}))
    assert r.status_code == 400
    messages = [d["message"] for d in r.json()["error"]["details"]]
    assert messages[0].startswith("words: line 1: answer 'Paris' is not a number")
    assert len(messages) == 2
    r = submit(client, make_spec(data={"train_files": "dataset:words", "grader": "exact_match"}))
    assert r.status_code == 201, r.content


def verl_parquet(rows: list[dict[str, Any]]) -> bytes:
    """A Parquet file in verl's layout, as its data preprocessing scripts write one."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


VERL_ROWS = [
    {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": "48 clips in April, half as many in May. Total?"}],
        "reward_model": {"style": "rule", "ground_truth": "72"},
        "extra_info": {"index": 0},
    },
    {
        "data_source": "DigitalLearningGmbH/MATH-lighteval",
        "prompt": [
            {"role": "system", "content": "Put your final answer within \\boxed{}."},
            {"role": "user", "content": "What is $\\frac{2}{4}$ in lowest terms?"},
        ],
        "reward_model": {"style": "rule", "ground_truth": "\\frac{1}{2}"},
        "extra_info": {"index": 7},
    },
]


def test_a_verl_parquet_upload_is_stored_as_parquet_and_trains_with_math(make_actor: Any, datasets_dir: Path) -> None:
    actor = make_actor("acme")
    client = client_for(actor)
    content = verl_parquet(VERL_ROWS)
    f = SimpleUploadedFile("gsm8k-math.parquet", content, content_type="application/vnd.apache.parquet")
    r = client.post("/api/v1/datasets", {"file": f}, format="multipart")
    assert r.status_code == 201, r.content
    assert r.json()["name"] == "gsm8k-math" and r.json()["rows"] == 2 and r.json()["size_bytes"] == len(content)
    dataset = Dataset.objects.get(tenant=actor.tenant, name="gsm8k-math")
    stored = datasets_dir.resolve() / str(actor.tenant.pk) / f"{dataset.pk}.parquet"
    assert stored.read_bytes() == content and dataset_path(dataset) == stored

    preview = client.get("/api/v1/datasets/gsm8k-math").json()["preview"]
    assert preview[1] == {"line": 2, "prompt": "What is $\\frac{2}{4}$ in lowest terms?", "answer": "\\frac{1}{2}"}

    r = client.post("/api/v1/graders/dry-run", {"grader": "math", "dataset": "gsm8k-math"}, format="json")
    assert r.status_code == 200, r.content
    assert [(x["completion"], x["reward"]) for x in r.json()["results"]] == [
        ("\\boxed{72}", 1.0),
        ("\\boxed{\\frac{1}{2}}", 1.0),
    ]
    r = client.post(
        "/api/v1/graders/dry-run",
        {"grader": "math", "dataset": "gsm8k-math", "completions": ["\\boxed{71}", "so $x = 0.5$"]},
        format="json",
    )
    assert [x["reward"] for x in r.json()["results"]] == [0.0, 1.0]

    r = submit(client, make_spec(data={"train_files": "dataset:gsm8k-math", "grader": "math"}))
    assert r.status_code == 201, r.content
    assert Job.objects.get(pk=r.json()["id"]).resolved_spec["data"]["train_files"] == str(stored)


def test_a_bad_parquet_upload_names_the_column_or_the_row(make_actor: Any, datasets_dir: Path) -> None:
    client = client_for(make_actor("acme"))
    no_truth = [{k: v for k, v in row.items() if k != "reward_model"} for row in VERL_ROWS]
    f = SimpleUploadedFile("a.parquet", verl_parquet(no_truth))
    r = client.post("/api/v1/datasets", {"file": f}, format="multipart")
    assert r.status_code == 400
    (detail,) = r.json()["error"]["details"]
    assert detail["field"] == "rows"
    assert detail["message"] == (
        'a.parquet: no column "reward_model.ground_truth" (the columns are: data_source, prompt, extra_info)'
    )
    bad_prompt = [VERL_ROWS[0], {**VERL_ROWS[1], "prompt": [{"role": "user", "content": ""}]}]
    f = SimpleUploadedFile("b.parquet", verl_parquet(bad_prompt))
    r = client.post("/api/v1/datasets", {"file": f}, format="multipart")
    assert r.status_code == 400
    assert r.json()["error"]["details"] == [
        {
            "field": "rows[2]",
            "message": "row 2 (index 1): prompt[0].content must be a non-empty string, got an empty string",
        }
    ]
    with override_settings(DATASET_MAX_BYTES=100):
        f = SimpleUploadedFile("c.parquet", verl_parquet(VERL_ROWS))
        assert client.post("/api/v1/datasets", {"file": f}, format="multipart").status_code == 413
    assert not Dataset.objects.exists()
    assert not any(p.is_file() for p in datasets_dir.rglob("*"))


def test_a_validation_set_takes_the_same_references_as_the_training_set(make_actor: Any, datasets_dir: Path) -> None:
    """``data.val_files`` names an uploaded dataset as ``train_files`` does: the engine is handed
    the stored path, the dataset cannot be deleted under the job, and an unknown one is named."""
    actor = make_actor("acme")
    client = client_for(actor)
    assert upload(client, "held-out", GOOD).status_code == 201
    r = submit(client, make_spec(data={"val_files": "dataset:nope"}, trainer={"test_freq": 2}))
    assert r.status_code == 400
    assert r.json()["error"]["details"][0]["field"] == "spec.data.val_files"
    r = submit(client, make_spec(data={"val_files": "dataset:held-out"}, trainer={"test_freq": 2}))
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    stored = str(dataset_path(Dataset.objects.get(tenant=actor.tenant, name="held-out")))
    assert engine_spec(job)["data"]["val_files"] == stored
    assert job.resolved_spec["trainer"]["test_freq"] == 2
    assert client.delete("/api/v1/datasets/held-out").status_code == 409
