"""A job's checkpoint as files on this host: a local directory as it is, a hub id fetched once.

A hub checkpoint is downloaded (weights, config, tokenizer; nothing else) into the cache
directory the deployment names, where every later job and every rollout worker of this host
finds it. Where the hub is unreachable the error names the field and the way out.
"""

from __future__ import annotations

from pathlib import Path

from jigsaw_engine.models.loading import ModelLoadError
from jigsaw_engine.spec.checkpoints import CheckpointSource

CHECKPOINT_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja")
"""What a hub download keeps: configs, weights, tokenizer files, a separate chat template."""


def checkpoint_directory(source: CheckpointSource, *, cache_dir: Path | None = None) -> Path:
    """The local directory of ``source``'s files, downloading a hub checkpoint when needed."""
    if source.path is not None:
        return Path(source.path)
    assert source.hub_id is not None
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            source.hub_id, revision=source.revision, cache_dir=cache_dir, allow_patterns=list(CHECKPOINT_FILES)
        )
    except Exception as exc:  # unreachable hub, unknown id or revision, a gated model
        first = str(exc).strip().splitlines()[0].split(". ")[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"model.hf: cannot fetch {source.describe()} ({first[:200]}); download it where the hub is "
            "reachable and name its directory with model: {path: ...}"
        ) from None
    return Path(folder)
