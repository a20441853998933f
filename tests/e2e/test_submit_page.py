"""The submit page's dataset section in a real headless Chromium against the live server:
upload a JSONL file with a bad row (the error names its line), upload a good one, dry-run
the grader (every perfect reply earns 1), put the dataset in the spec and submit the job:
the engine is handed the stored file's path."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test.utils import override_settings

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import check_widths
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_path
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROWS = [
    {"prompt": "What is 2+2?", "answer": "4"},
    {"prompt": "What is 6*7?", "answer": "42"},
    {"prompt": "What is 10-3?", "answer": "7"},
]


@pytest.fixture()
def datasets_dir(tmp_path: Path) -> Iterator[Path]:
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        yield tmp_path / "datasets"


def jsonl(rows: list[Any]) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode()


def test_upload_dry_run_and_submit_with_a_dataset(browser, live_server_url, engine_speed, datasets_dir) -> None:
    engine_speed(40.0)
    make_member("alice", "acme")
    base = live_server_url
    page, errors = sign_in(browser, base, "alice")
    page.goto(f"{base}/new")
    panel = page.get_by_test_id("dataset-panel")
    panel.wait_for()

    # A file with one bad row: nothing is stored, the row's line is named.
    bad = [ROWS[0], {"prompt": "no answer here"}, ROWS[1]]
    page.get_by_test_id("dataset-file").set_input_files(
        files=[{"name": "bad.jsonl", "mimeType": "application/jsonl", "buffer": jsonl(bad)}]
    )
    row_error = page.get_by_test_id("dataset-row-error").first
    row_error.wait_for()
    assert row_error.inner_text() == 'line 2: missing field "answer"'
    assert row_error.get_attribute("data-line") == "2"
    assert "bad.jsonl was not stored" in page.get_by_test_id("dataset-upload-error").inner_text()
    assert not Dataset.objects.exists()
    page.screenshot(path=str(ARTIFACTS / "submit-dataset-error.png"), full_page=True)

    # A good file: its row count, and it is picked.
    page.get_by_test_id("dataset-file").set_input_files(
        files=[{"name": "arith.jsonl", "mimeType": "application/jsonl", "buffer": jsonl(ROWS)}]
    )
    result = page.get_by_test_id("dataset-upload-result")
    result.wait_for()
    assert "arith" in result.inner_text() and "3 rows" in result.inner_text()
    assert page.get_by_test_id("dataset-upload-error").count() == 0
    assert page.get_by_test_id("dataset-select").input_value() == "arith"

    # Dry run with the numeric grader: a perfect reply per row, each rewarded 1.
    page.get_by_test_id("grader-select").select_option("numeric")
    page.get_by_test_id("dry-run").click()
    page.get_by_test_id("dry-run-results").wait_for()
    rows = page.get_by_test_id("dry-run-row")
    assert rows.count() == 3
    assert rows.first.inner_text().startswith("1\tWhat is 2+2?\t4\t#### 4")
    assert page.get_by_test_id("dry-run-reward").all_inner_texts() == ["1", "1", "1"]
    page.screenshot(path=str(ARTIFACTS / "submit-dataset-dry-run.png"), full_page=True)

    # Another upload, previewed (its facts and first rows as stored), then deleted: it leaves
    # the list and the store, and the choice moves back to the first dataset.
    page.get_by_test_id("dataset-file").set_input_files(
        files=[{"name": "scratch.jsonl", "mimeType": "application/jsonl", "buffer": jsonl(ROWS[1:])}]
    )
    page.wait_for_function("() => document.querySelector('[data-testid=dataset-select]')?.value === 'scratch'")
    page.get_by_test_id("preview-dataset").click()
    preview = page.locator("[data-testid=dataset-preview][data-dataset=scratch]")
    preview.wait_for()
    assert "2 rows" in preview.inner_text()
    assert page.get_by_test_id("dataset-preview-row").first.inner_text().startswith("1\tWhat is 6*7?\t42")
    check_widths(page, "submit", ARTIFACTS)
    page.get_by_test_id("delete-dataset").click()
    page.get_by_test_id("confirm-delete-dataset").click()
    page.get_by_test_id("dataset-deleted").wait_for()
    assert page.get_by_test_id("dataset-preview").count() == 0
    assert page.get_by_test_id("dataset-select").input_value() == "arith"
    assert page.locator("[data-testid=dataset-select] option").all_inner_texts() == ["arith (3 rows)"]
    assert list(Dataset.objects.values_list("name", flat=True)) == ["arith"]

    # Put it in the spec and submit: the engine gets the stored file's absolute path.
    page.get_by_test_id("use-dataset").click()
    spec = json.loads(page.get_by_test_id("spec-input").input_value())
    assert spec["data"]["train_files"] == "dataset:arith" and spec["data"]["grader"] == "numeric"
    page.get_by_test_id("job-name-input").fill("e2e-dataset-job")
    page.get_by_test_id("submit-job").click()
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}$"))
    job = Job.objects.get(pk=page.url.rsplit("/", 1)[1])
    expected = str(dataset_path(Dataset.objects.get(name="arith")))
    assert expected.startswith(str(datasets_dir.resolve()))
    assert job.spec["data"]["train_files"] == expected
    assert job.resolved_spec["data"]["train_files"] == expected
    assert real_errors(errors) == []


def parquet(rows: list[dict[str, Any]]) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def test_a_parquet_file_in_verls_layout_uploads_from_the_form(browser, live_server_url, datasets_dir) -> None:
    """The form sends a Parquet file as it is: a file in verl's layout is stored with its rows
    and conversations; one without the answer column is refused naming it."""
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    page.goto(f"{live_server_url}/new")
    page.get_by_test_id("dataset-panel").wait_for()
    verl_rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [
                {"role": "system", "content": "Answer with #### and the number."},
                {"role": "user", "content": row["prompt"]},
            ],
            "reward_model": {"style": "rule", "ground_truth": row["answer"]},
        }
        for row in ROWS
    ]
    no_answers = [{"data_source": r["data_source"], "prompt": r["prompt"]} for r in verl_rows]
    page.get_by_test_id("dataset-file").set_input_files(
        files=[{"name": "no-answers.parquet", "mimeType": "application/octet-stream", "buffer": parquet(no_answers)}]
    )
    error = page.get_by_test_id("dataset-upload-error")
    error.wait_for()
    assert "no-answers.parquet was not stored" in error.inner_text() and "reward_model" in error.inner_text()

    page.get_by_test_id("dataset-file").set_input_files(
        files=[{"name": "gsm8k train.parquet", "mimeType": "application/octet-stream", "buffer": parquet(verl_rows)}]
    )
    result = page.get_by_test_id("dataset-upload-result")
    result.wait_for()
    assert "gsm8k-train" in result.inner_text() and "3 rows" in result.inner_text()
    stored = Dataset.objects.get(name="gsm8k-train")
    assert dataset_path(stored).suffix == ".parquet"
    assert real_errors(errors) == []
