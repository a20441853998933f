"""Every checkpoint of a real job holds its policy as a Hugging Face directory: transformers
loads it with nothing of this project, with the trained weights, the job's tokenizer and the
chat template its prompts were written with."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from jigsaw_engine.real.job_checkpoints import (
    CheckpointNotExported,
    CheckpointStepMissing,
    checkpoint_model_files,
)
from jigsaw_engine.train.rl_job import MODEL_FOLDER
from tests.real_checkpoint import train_tiny_job

JOB_ID = str(uuid.uuid4())


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, tiny_policy_cache: Path) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("checkpoints")
    return root, train_tiny_job(root, JOB_ID, policy_cache=tiny_policy_cache)


def test_the_checkpoint_loads_with_transformers_alone_and_holds_the_trained_weights(trained) -> None:
    root, pipeline = trained
    folder = root / JOB_ID / "step-000001"
    assert (folder / MODEL_FOLDER).name == "model"  # what job_checkpoints looks for

    model = AutoModelForCausalLM.from_pretrained(folder / "model", local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder / "model", local_files_only=True)

    saved = torch.load(folder / "state.pt", weights_only=False)["trainer"]["model"]
    loaded = model.state_dict()
    assert set(loaded) == set(saved)
    assert all(torch.equal(loaded[name], saved[name]) for name in saved)
    trained_now = pipeline.job.trainer.weights()  # the step-1 policy the job goes on from
    assert all(torch.equal(loaded[name], tensor) for name, tensor in trained_now.items())
    job_tokenizer = pipeline.job.tokenizer
    text = "Compute 3 + 4.<|assistant|>7<|endoftext|>"
    assert tokenizer(text)["input_ids"] == job_tokenizer(text)["input_ids"]
    # The prompt format a tiny preset was trained on, as a chat template any client applies.
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Compute 3 + 4."}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "<|user|>Compute 3 + 4.<|assistant|>"
    assert pipeline.job.recent_samples[0]["prompt"].startswith("<|user|>")
    # The samples count the tokens the model wrote, as the batch's response_length/ metrics do.
    assert all(s["response_tokens"] >= 1 for s in pipeline.job.recent_samples)


def test_the_model_files_are_listed_and_a_missing_step_names_the_steps_there_are(trained) -> None:
    root, _ = trained
    names = [name for name, _ in checkpoint_model_files(root, JOB_ID, 1)]
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= set(names)
    assert names == sorted(names)
    with pytest.raises(CheckpointStepMissing) as missing:
        checkpoint_model_files(root, JOB_ID, 7)
    assert missing.value.steps == [1]


def test_a_checkpoint_without_a_model_folder_says_so(tmp_path: Path) -> None:
    job_id = str(uuid.uuid4())
    (tmp_path / job_id / "step-000003").mkdir(parents=True)
    with pytest.raises(CheckpointNotExported):
        checkpoint_model_files(tmp_path, job_id, 3)
    with pytest.raises(ValueError):
        checkpoint_model_files(tmp_path, "../etc", 3)
