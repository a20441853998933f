"""A real job trains a Hugging Face checkpoint by path: its own tokenizer, chat template and size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from jigsaw_engine.models.checkpoints import checkpoint_directory
from jigsaw_engine.models.loading import ModelLoadError
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline, rollout_engine_for
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.spec.checkpoints import CheckpointSource
from jigsaw_engine.spec.pipeline import parse_pipeline_spec, validate_pipeline_spec
from jigsaw_engine.train.example_checkpoint import ExampleCheckpoint, build_example_checkpoint

SMALL = ExampleCheckpoint(warmup_steps=60)


@pytest.fixture(scope="module")
def example_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3-arith", SMALL)


def checkpoint_spec(folder: Path, **extra: object) -> dict:
    return {
        "name": "ckpt",
        "model": {"path": str(folder)},
        "workload": "gsm8k",
        "data": {"train_batch_size": 8},
        "rollout": {"n": 4, "max_response_length": 8},
        "resources": {"num_gpus": 1},
        "trainer": {"total_steps": 2},
        **extra,
    }


def test_the_example_checkpoint_is_a_plain_hugging_face_directory(example_checkpoint):
    files = {p.name for p in example_checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= files
    model = parse_pipeline_spec(checkpoint_spec(example_checkpoint)).model
    assert model.architecture == "qwen3" and 0.5e6 < model.num_params < 2e6
    assert build_example_checkpoint(example_checkpoint, SMALL) == example_checkpoint  # same recipe: kept


def test_a_checkpoint_trains_with_its_own_chat_template(example_checkpoint):
    pipeline = build_real_pipeline(
        parse_pipeline_spec(checkpoint_spec(example_checkpoint)),
        train_parts=1,
        options=RealJobOptions(rollout_engine="torch"),
    )
    assert pipeline.job.tokenizer.chat_template is not None
    metrics = pipeline.run_step()
    assert metrics[names.RESPONSE_LENGTH_MEAN] > 0
    sample = pipeline.job.recent_samples[0]
    assert sample["prompt"].startswith("<|im_start|>user\nCompute ") and sample["prompt"].endswith(
        "<|im_start|>assistant\n"
    )


def test_a_checkpoint_rolls_out_on_vllm_by_default_and_learns_what_the_torch_loop_learns(example_checkpoint):
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install -e .[rollout-cpu]")
    spec = parse_pipeline_spec(checkpoint_spec(example_checkpoint))
    assert rollout_engine_for(spec, RealJobOptions()) == "vllm"
    assert (
        rollout_engine_for(replace(spec, model=parse_pipeline_spec({"model": "tiny-qwen2-1m"}).model), RealJobOptions())
        == "torch"
    )
    on_vllm = build_real_pipeline(spec, train_parts=1)
    on_torch = build_real_pipeline(spec, train_parts=1, options=RealJobOptions(rollout_engine="torch"))
    assert type(on_vllm.job.engines[0]).__name__ == "VllmRolloutEngine"
    vllm_steps = [on_vllm.run_step() for _ in range(2)]
    torch_steps = [on_torch.run_step() for _ in range(2)]
    # Portable sampling, and the new weights reached vLLM in memory (timed as the step's sync).
    assert [m[names.SCORE_MEAN] for m in vllm_steps] == [m[names.SCORE_MEAN] for m in torch_steps]
    assert all(m[names.timing_key("sync")] > 0 for m in vllm_steps + torch_steps)
    # While the job trained, the torch engine dropped its KV cache; vLLM's CPU build has no sleep
    # mode and kept its memory (the log names the fallback).
    assert all(m[names.ROLLOUT_MEMORY_RELEASED] == 1.0 for m in torch_steps)
    assert all(m[names.ROLLOUT_MEMORY_RELEASED] == (1.0 if torch.cuda.is_available() else 0.0) for m in vllm_steps)


def test_a_hub_checkpoint_that_cannot_be_reached_is_refused_with_the_way_out(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    (problem,) = validate_pipeline_spec({"model": {"hf": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main"}})
    assert problem.field == "model.hf"
    assert "Qwen/Qwen2.5-0.5B-Instruct@main" in problem.message and "model: {path: ...}" in problem.message
    with pytest.raises(ModelLoadError, match=r"model.hf: cannot fetch Qwen/Qwen2.5-0.5B-Instruct@main"):
        checkpoint_directory(
            CheckpointSource(hub_id="Qwen/Qwen2.5-0.5B-Instruct", revision="main"), cache_dir=tmp_path / "cache"
        )


def test_a_llama_checkpoint_trains_on_vllm_too(tmp_path):
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install -e .[rollout-cpu]")
    folder = build_example_checkpoint(tmp_path / "tiny-llama", replace(SMALL, architecture="llama"))
    spec = parse_pipeline_spec(checkpoint_spec(folder))
    assert spec.model.architecture == "llama"
    pipeline = build_real_pipeline(spec, train_parts=1)
    assert type(pipeline.job.engines[0]).__name__ == "VllmRolloutEngine"
    assert pipeline.run_step()[names.RESPONSE_LENGTH_MEAN] > 0


def test_the_checkpoint_example_validates_once_the_script_has_made_its_checkpoint(capsys):
    """What a fresh clone does: `scripts/make_example_checkpoint.py`, then the example workload
    names that checkpoint by a path relative to itself."""
    from jigsaw_engine.cli import main

    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "real-checkpoint.yaml"
    build_example_checkpoint(root / "var" / "models" / "tiny-qwen3-arith")  # the script's default
    assert main(["validate", str(example)]) == 0
    assert capsys.readouterr().out.startswith(f"{example}: ok (a workload of 3 pipelines on 2 x cpu)")
