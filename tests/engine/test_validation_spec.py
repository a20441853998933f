"""Validation fields of a spec (verl's ``data.val_files``, ``trainer.test_freq``,
``rollout.val_kwargs``): each problem named with its field, the reason and the fix."""

from __future__ import annotations

import pytest

from jigsaw_engine.api import resolve_spec, validate_spec
from jigsaw_engine.spec import parse_pipeline_spec
from tests.engine.builders import make_spec


def messages(spec: object) -> dict[str, str]:
    return {e.field: e.message for e in validate_spec(spec)}


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"trainer": {"test_freq": 2}}, "trainer.test_freq", "give data.val_files"),
        ({"trainer": {"val_before_train": False}}, "trainer.val_before_train", "give data.val_files"),
        ({"data": {"val_files": "v.jsonl"}, "trainer": {"test_freq": 0}}, "trainer.test_freq", "or -1 (off)"),
        ({"data": {"val_file": "v.jsonl"}}, "data.val_file", "did you mean 'val_files'?"),
        ({"data": {"val_files": 3}}, "data.val_files", "must be a string"),
        ({"rollout": {"val_kwargs": {"top_q": 1}}}, "rollout.val_kwargs.top_q", "unknown field"),
        ({"rollout": {"val_kwargs": {"n": 4}}}, "rollout.val_kwargs.n", "set do_sample: true"),
        ({"rollout": {"val_kwargs": {"do_sample": True}}}, "rollout.val_kwargs.temperature", "must be > 0"),
    ],
)
def test_a_bad_validation_field_is_named_with_reason_and_fix(overrides: dict, field: str, fragment: str) -> None:
    found = messages(make_spec(**overrides))
    assert field in found, found
    assert fragment in found[field]


def test_val_kwargs_default_to_greedy_and_sampling_takes_n_and_temperature() -> None:
    greedy = parse_pipeline_spec(make_spec(data={"val_files": "v.jsonl"}, trainer={"test_freq": 2}))
    assert (greedy.val_files, greedy.test_freq, greedy.val_before_train) == ("v.jsonl", 2, True)
    assert (greedy.rollout.val_n, greedy.rollout.val_temperature) == (1, 0.0)
    sampled = parse_pipeline_spec(
        make_spec(data={"val_files": "v.jsonl"}, rollout={"val_kwargs": {"n": 4, "temperature": 0.7}})
    )
    assert (sampled.rollout.val_n, sampled.rollout.val_temperature, sampled.test_freq) == (4, 0.7, -1)
    not_sampled = parse_pipeline_spec(
        make_spec(data={"val_files": "v.jsonl"}, rollout={"val_kwargs": {"temperature": 0.7, "do_sample": False}})
    )
    assert not_sampled.rollout.val_temperature == 0.0  # verl: do_sample false is greedy


def test_the_resolved_spec_keeps_the_validation_settings_and_omits_them_without_a_set() -> None:
    spec = make_spec(data={"val_files": "v.jsonl"}, trainer={"test_freq": 2, "val_before_train": False})
    resolved = resolve_spec(spec)
    assert resolved["data"]["val_files"] == "v.jsonl"
    assert resolved["trainer"]["test_freq"] == 2 and resolved["trainer"]["val_before_train"] is False
    assert resolved["rollout"]["val_kwargs"] == {"n": 1, "temperature": 0.0, "do_sample": False}
    assert parse_pipeline_spec(resolved) == parse_pipeline_spec(spec)  # a clone runs the same
    plain = resolve_spec(make_spec())
    assert "val_files" not in plain["data"] and "test_freq" not in plain["trainer"]
