"""A job's model named by a Hugging Face checkpoint: a local directory or a hub id at a revision.

The spec reads only the checkpoint's ``config.json`` (the cost model's numbers: layers, widths,
parameters), so the simulator, the estimate and the scheduler see the real size of a model they
never load. Loading weights and tokenizer is the real runtime's business.

A hub id is resolved from the local Hugging Face cache first, then from the hub when the machine
can reach it (never when ``HF_HUB_OFFLINE`` is set). Where neither works the field is refused
with the way out: download the checkpoint where the hub is reachable and name its directory.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jigsaw_engine.spec.models import ModelSpec, model_from_hf_config

DENSE_DECODERS: dict[str, str] = {
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
}
"""Architectures (``config.json``'s ``architectures``) whose cost the cost model knows and that
the real runtime trains and serves: dense decoders with grouped-query attention."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
HUB_TIMEOUT_S = 10.0
"""How long reading a config from the hub may take before the field is refused."""


@dataclass(frozen=True, slots=True)
class CheckpointSource:
    """Where a checkpoint's files are: ``path`` once resolved (a hub id's local snapshot
    directory is known only after the engine downloads it)."""

    path: str | None = None
    hub_id: str | None = None
    revision: str | None = None

    def describe(self) -> str:
        return f"{self.hub_id}@{self.revision}" if self.hub_id is not None else str(self.path)


class CheckpointProblem(ValueError):
    """Why a checkpoint cannot be used; the message says what to do instead."""


def model_from_checkpoint_dir(path: str) -> ModelSpec:
    """The model at directory ``path``, described from its ``config.json``."""
    folder = Path(path).expanduser()
    if not folder.is_absolute():
        raise CheckpointProblem(f"must be an absolute path, got {path!r}")
    if not folder.is_dir():
        raise CheckpointProblem(f"{path} is not a directory; name a folder written by save_pretrained")
    config = _read_config(folder / "config.json", where=path)
    return _described(folder.name, config, CheckpointSource(path=str(folder)), where=path)


def model_from_hub(hub_id: str, revision: str) -> ModelSpec:
    """The model ``hub_id`` at ``revision``, described from its ``config.json`` (cache, then hub)."""
    if not _HUB_ID.match(hub_id):
        raise CheckpointProblem(f"must be a hub id like 'Qwen/Qwen2.5-0.5B-Instruct', got {hub_id!r}")
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
    except ImportError:  # the engine's light install: no hub client
        raise CheckpointProblem("reading a hub checkpoint needs huggingface_hub, which is not installed") from None
    cached = try_to_load_from_cache(hub_id, "config.json", revision=revision)
    if isinstance(cached, str):
        config_path = Path(cached)
    else:
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            raise CheckpointProblem(_unreachable(hub_id, revision, "HF_HUB_OFFLINE is set and it is not cached"))
        try:
            config_path = Path(hf_hub_download(hub_id, "config.json", revision=revision, etag_timeout=HUB_TIMEOUT_S))
        except Exception as exc:  # connection refused, DNS, 401/404: all mean "not from here"
            raise CheckpointProblem(_unreachable(hub_id, revision, _short(exc))) from None
    config = _read_config(config_path, where=f"{hub_id}@{revision}")
    return _described(hub_id, config, CheckpointSource(hub_id=hub_id, revision=revision), where=hub_id)


def _unreachable(hub_id: str, revision: str, reason: str) -> str:
    return (
        f"cannot read {hub_id}@{revision}'s config.json ({reason}); download the checkpoint where "
        "the hub is reachable and name its directory with model: {path: ...}"
    )


def _short(exc: Exception) -> str:
    """The first sentence of an exception's message (the hub client's run to paragraphs)."""
    text = str(exc).strip()
    first = text.splitlines()[0].split(". ")[0] if text else type(exc).__name__
    return first[:200]


def _read_config(path: Path, *, where: str) -> Mapping[str, Any]:
    if not path.is_file():
        raise CheckpointProblem(
            f"{where} is not a Hugging Face checkpoint: it has no config.json (save_pretrained writes one)"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointProblem(f"{where}: config.json is not readable JSON ({_short(exc)})") from None
    if not isinstance(config, Mapping):
        raise CheckpointProblem(f"{where}: config.json must hold a JSON object")
    return config


def _described(name: str, config: Mapping[str, Any], source: CheckpointSource, *, where: str) -> ModelSpec:
    architectures = config.get("architectures") or []
    known = [a for a in architectures if a in DENSE_DECODERS]
    if not known:
        got = ", ".join(map(str, architectures)) or f"model_type {config.get('model_type')!r}"
        raise CheckpointProblem(
            f"{where}: {got} is not a supported dense decoder; supported: {', '.join(DENSE_DECODERS)}"
        )
    try:
        spec = model_from_hf_config(name, config)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointProblem(f"{where}: config.json lacks what the cost model needs ({_short(exc)})") from None
    return replace(spec, source=source, architecture=DENSE_DECODERS[known[0]])
