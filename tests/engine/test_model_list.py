"""The models a job can train, as the submit form's picker lists them: the catalogue in simulated
mode, the tiny presets in real mode, and the operator's checkpoints in both, each spelled as a
spec names it, with the presets that use it."""

from __future__ import annotations

from pathlib import Path

from jigsaw_engine import api
from tests.engine.test_checkpoint_specs import checkpoint


def test_simulated_mode_lists_the_catalogue_with_its_presets() -> None:
    models = {m["name"]: m for m in api.list_models()}
    assert {"qwen2.5-7b", "qwen3-0.6b", "llama-3.1-8b"} <= set(models)
    assert not any(name.startswith("tiny-") for name in models)
    qwen = models["qwen3-0.6b"]
    assert qwen["kind"] == "catalogue" and qwen["model"] == "qwen3-0.6b" and qwen["num_params"] == 0.60e9
    assert "math-grpo" in qwen["presets"]
    # Every model listed validates as a spec's model: the picker offers nothing a submit refuses.
    assert all(api.validate_spec({"model": m["model"]}) == [] for m in models.values())


def test_real_mode_lists_tiny_presets_and_the_operators_checkpoints(tmp_path: Path) -> None:
    root = tmp_path / "models"
    folder = checkpoint(root / "qwen3-0.6b-mine")
    (root / "not-a-model").mkdir()
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text("{not json")
    models = api.list_models(mode="real", model_roots=[str(root), str(tmp_path / "absent")])
    kinds = {m["name"]: m["kind"] for m in models}
    assert kinds == {
        "tiny-qwen2-1m": "tiny",
        "tiny-llama-1m": "tiny",
        "tiny-qwen2-6m": "tiny",
        "qwen3-0.6b-mine": "checkpoint",
    }
    mine = next(m for m in models if m["kind"] == "checkpoint")
    assert mine["model"] == {"path": str(folder.resolve())} and mine["architecture"] == "qwen3"
    assert mine["presets"] == ["checkpoint-qwen3-0.6b-mine"]
    assert api.validate_spec({"model": mine["model"]}, model_roots=[str(root)]) == []
