"""Spec parsing: every problem is reported with its field path, the bad value and the fix."""

from __future__ import annotations

import pytest

from jigsaw_engine.api import resolve_spec, validate_spec
from jigsaw_engine.errors import SpecError
from jigsaw_engine.spec import parse_cluster_spec, parse_pipeline_spec
from jigsaw_engine.spec.models import MODEL_CATALOGUE, model_from_hf_config
from jigsaw_engine.spec.presets import PRESETS
from tests.engine.builders import make_cluster, make_spec


def messages(spec: object) -> dict[str, str]:
    return {e.field: e.message for e in validate_spec(spec)}


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"rollout": {"n": 0}}, "rollout.n", "must be >= 1, got 0"),
        ({"rollout": {"n": 1}}, "rollout.n", "must be >= 2 for grpo"),
        ({"data": {"train_batch_size": "64"}}, "data.train_batch_size", "must be an integer, got '64'"),
        ({"model": "qwen-7b"}, "model", "must be one of"),
        ({"algorithm": "grpoo"}, "algorithm", "did you mean 'grpo'"),
        ({"resources": {"num_gpus": 6, "tp": 4}}, "resources.tp", "must divide resources.num_gpus (6), got 4"),
        ({"staleness": 2}, "staleness", "must be 0 when mode is 'sync'"),
        (
            {"resources": {"num_gpus": 4, "tp": 2, "rollout_gpus": 3}},
            "resources.rollout_gpus",
            "multiple of resources.tp (2)",
        ),
        ({"resources": {"num_gpus": 4, "rollout_gpus": 4}}, "resources.rollout_gpus", "must be <= 3, got 4"),
        ({"rollout": {"nn": 4}}, "rollout.nn", "unknown field; did you mean 'n'?"),
        ({"trainer": {"total_steps": True}}, "trainer.total_steps", "must be an integer, got True"),
    ],
)
def test_bad_field_is_named_with_reason(overrides: dict, field: str, fragment: str) -> None:
    found = messages(make_spec(**overrides))
    assert field in found, found
    assert fragment in found[field]


def test_every_problem_is_reported_at_once() -> None:
    found = messages(make_spec(rollout={"n": 0}, data={"train_batch_size": -1}, seed="x"))
    assert set(found) == {"rollout.n", "data.train_batch_size", "seed"}


def test_not_a_mapping() -> None:
    with pytest.raises(SpecError) as info:
        parse_pipeline_spec(["not", "a", "mapping"])
    assert str(info.value) == "<root>: must be a mapping, got list"


def test_cluster_too_small_is_reported_on_num_gpus() -> None:
    errors = validate_spec(make_spec(resources={"num_gpus": 16}), make_cluster(8))
    assert [(e.field, e.message) for e in errors] == [
        ("resources.num_gpus", "must be <= 8 (the cluster's devices), got 16")
    ]


def test_cluster_spec_errors_carry_paths() -> None:
    with pytest.raises(SpecError) as info:
        parse_cluster_spec({"num_nodes": 0, "device_type": "tpu"})
    fields = [e.field for e in info.value.errors]
    assert fields == ["cluster.num_nodes", "cluster.device_type"]


def test_resolve_fills_defaults_and_keeps_values() -> None:
    resolved = resolve_spec({"model": "qwen3-4b", "rollout": {"n": 8}})
    assert resolved["model"] == "qwen3-4b"
    assert resolved["rollout"] == {"n": 8, "max_response_length": 8192, "temperature": 1.0}
    assert resolved["mode"] == "sync" and resolved["staleness"] == 0
    assert resolved["resources"] == {"num_gpus": 2, "tp": 1}


def test_async_defaults_to_staleness_one() -> None:
    assert resolve_spec({"mode": "async"})["staleness"] == 1


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_presets_are_valid(preset) -> None:  # type: ignore[no-untyped-def]
    assert validate_spec(preset.spec, make_cluster(8)) == []


def test_model_from_hf_config_matches_catalogue() -> None:
    # Qwen2.5-7B's published config.json; the catalogue says 7.62e9 parameters.
    config = {
        "hidden_size": 3584,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    }
    derived = model_from_hf_config("q7", config)
    expected = MODEL_CATALOGUE["qwen2.5-7b"]
    assert derived.num_params == pytest.approx(expected.num_params, rel=0.02)
    assert derived.kv_bytes_per_token == expected.kv_bytes_per_token


def test_a_users_dataset_and_grader_are_read_from_data_and_checked():
    spec = parse_pipeline_spec({"data": {"train_files": "/data/mine.jsonl", "grader": "exact_match"}})
    assert (spec.train_files, spec.grader) == ("/data/mine.jsonl", "exact_match")
    assert parse_pipeline_spec({}).train_files is None
    # Which rewards are installed is the environments' to say: the API's validation refuses others.
    [error] = validate_spec({"data": {"grader": "fuzzy"}})
    assert error.field == "data.grader" and error.message.startswith("unknown reward 'fuzzy'; installed rewards:")
    with pytest.raises(SpecError, match=r"data\.grader: must be a string"):
        parse_pipeline_spec({"data": {"grader": 3}})
