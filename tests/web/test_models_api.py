"""``GET /api/v1/models``: what a tenant can train here, as the submit form lists it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.engine.test_checkpoint_specs import checkpoint

pytestmark = pytest.mark.django_db(transaction=True)


def _client(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def test_the_catalogue_in_simulated_mode_each_as_a_spec_names_it(make_actor) -> None:
    c = _client(make_actor("acme").token)
    r = c.get("/api/v1/models")
    assert r.status_code == 200
    models = {m["name"]: m for m in r.json()["results"]}
    assert models["qwen3-0.6b"]["model"] == "qwen3-0.6b" and models["qwen3-0.6b"]["kind"] == "catalogue"
    assert "math-grpo" in models["qwen3-0.6b"]["presets"]
    # Each one is accepted by a submit's validation.
    for m in models.values():
        estimate = c.post("/api/v1/jobs/estimate", {"spec": {"model": m["model"]}}, format="json")
        assert estimate.status_code == 200, (m["name"], estimate.content)
    assert APIClient().get("/api/v1/models").status_code in (401, 403)


def test_real_mode_offers_tiny_models_and_the_operators_checkpoints(make_actor, settings, tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "models" / "qwen3-0.6b-mine")
    settings.ENGINE_MODE = "real"
    settings.ENGINE_CLUSTER = {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"}
    settings.ENGINE_MODEL_ROOTS = [str(tmp_path / "models")]
    models = _client(make_actor("acme").token).get("/api/v1/models").json()["results"]
    assert [m["kind"] for m in models] == ["tiny", "tiny", "tiny", "checkpoint"]
    assert models[-1]["model"] == {"path": str(folder.resolve())}
    assert models[-1]["presets"] == ["checkpoint-qwen3-0.6b-mine"]
