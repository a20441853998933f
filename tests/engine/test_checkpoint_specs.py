"""A job's model named by a checkpoint: read from its config.json, refused with a reason when it cannot be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigsaw_engine import api
from jigsaw_engine.real.checks import check_real_spec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec, validate_pipeline_spec
from jigsaw_engine.spec.workload_file import load_workload_file

QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 1024,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}
"""Qwen3-0.6B's published shape."""


def checkpoint(folder: Path, config: dict | None = None, *, weights: bool = True, tokenizer: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or QWEN3_CONFIG))
    if weights:
        (folder / "model.safetensors").write_bytes(b"")
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}")
        (folder / "tokenizer_config.json").write_text("{}")
    return folder


def problems(spec: dict) -> dict[str, str]:
    return {e.field: e.message for e in validate_pipeline_spec(spec)}


def test_a_checkpoint_by_path_is_costed_at_its_real_size(tmp_path):
    folder = checkpoint(tmp_path / "qwen3-0.6b-mine")
    model = parse_pipeline_spec({"model": {"path": str(folder)}}).model
    assert model.name == "qwen3-0.6b-mine" and model.architecture == "qwen3"
    # The catalogue's Qwen3-0.6B (0.60e9, from the model card) within 1%, layers and KV width exact.
    assert model.num_params == pytest.approx(0.60e9, rel=0.01)
    assert (model.num_layers, model.num_kv_heads, model.head_dim) == (28, 8, 128)
    # The simulator and the resolved spec see the checkpoint, not a name.
    assert api.resolve_spec({"model": {"path": str(folder)}})["model"] == {"path": str(folder)}


@pytest.mark.parametrize(
    ("model", "field", "says"),
    [
        ({"path": "relative/dir"}, "model.path", "absolute path"),
        ({"path": "/nonexistent/jigsaw-ckpt"}, "model.path", "is not a directory"),
        ({"path": ""}, "model.path", "empty"),
        ({}, "model", "give one of {path: DIR} or {hf: ID, revision: REV}"),
        ({"path": "/x", "hf": "a/b"}, "model", "not both"),
        ({"hf": "not a hub id"}, "model.hf", "must be a hub id"),
        ({"pth": "/x"}, "model.pth", "did you mean 'path'"),
    ],
)
def test_a_bad_checkpoint_reference_names_its_field(model, field, says):
    assert says in problems({"model": model}).get(field, "")


def test_a_folder_that_is_not_a_checkpoint_is_refused_with_the_reason(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "has no config.json" in problems({"model": {"path": str(empty)}})["model.path"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert "not readable JSON" in problems({"model": {"path": str(broken)}})["model.path"]
    moe = checkpoint(tmp_path / "moe", {**QWEN3_CONFIG, "architectures": ["Qwen3MoeForCausalLM"]})
    message = problems({"model": {"path": str(moe)}})["model.path"]
    assert "Qwen3MoeForCausalLM is not a supported dense decoder" in message and "LlamaForCausalLM" in message


def test_a_real_run_needs_weights_and_a_tokenizer_and_takes_no_catalogue_model(tmp_path):
    def real_problems(spec: dict) -> dict[str, str]:
        return {e.field: e.message for e in check_real_spec(parse_pipeline_spec({"workload": "gsm8k", **spec}))}

    assert real_problems({"model": {"path": str(checkpoint(tmp_path / "ok"))}}) == {}
    no_tokenizer = checkpoint(tmp_path / "no-tok", tokenizer=False)
    assert "has no tokenizer" in real_problems({"model": {"path": str(no_tokenizer)}})["model.path"]
    no_weights = checkpoint(tmp_path / "no-weights", weights=False)
    assert "holds no weights" in real_problems({"model": {"path": str(no_weights)}})["model.path"]
    assert "simulated runs only" in real_problems({"model": "qwen2.5-7b"})["model"]
    tp = real_problems({"model": {"path": str(tmp_path / "ok")}, "resources": {"num_gpus": 2, "tp": 2}})
    assert "set resources.tp: 1" in tp["resources.tp"]


def test_a_service_takes_checkpoints_only_from_its_model_folders(tmp_path):
    inside = checkpoint(tmp_path / "models" / "mine")
    roots = [str(tmp_path / "models")]
    assert api.validate_spec({"model": {"path": str(inside)}}, model_roots=roots) == []
    for elsewhere in ("/etc", str(tmp_path / "models" / ".." / "secret")):
        (refused,) = api.validate_spec({"model": {"path": elsewhere}}, model_roots=roots)
        assert refused.field == "model.path" and "ENGINE_MODEL_ROOTS" in refused.message


def test_a_workload_file_reads_relative_checkpoint_paths_from_its_own_folder(tmp_path):
    checkpoint(tmp_path / "models" / "mine")
    (tmp_path / "work").mkdir()
    workload = tmp_path / "work" / "w.yaml"
    workload.write_text(
        "cluster: {num_nodes: 1, devices_per_node: 2, device_type: cpu}\n"
        "pipelines:\n  - {name: a, model: {path: ../models/mine}, resources: {num_gpus: 1}}\n"
    )
    (spec,) = load_workload_file(workload).pipelines
    assert spec["model"] == {"path": str(tmp_path / "work" / ".." / "models" / "mine")}
