"""What a job can train, for the submit form's model picker: the catalogue's models (simulated
mode: full-size models whose runs the cost model times), the tiny presets (real mode: built
here and trained on this machine's cores) and the checkpoints the operator put directly under
the model roots (by path, both modes), each with the presets that use it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from jigsaw_engine.spec.checkpoints import CheckpointProblem, model_from_checkpoint_dir
from jigsaw_engine.spec.models import MODEL_CATALOGUE, ModelSpec
from jigsaw_engine.spec.presets import Preset

ModelKind = Literal["catalogue", "tiny", "checkpoint"]

TINY_PREFIX = "tiny-"
"""The catalogue's tiny presets, built locally for real runs, are named ``tiny-...``."""


def _entry(model: ModelSpec, kind: ModelKind, spec_value: str | dict[str, str]) -> dict[str, Any]:
    return {
        "name": model.name,
        "kind": kind,
        "model": spec_value,
        "num_params": model.num_params,
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "architecture": model.architecture,
        "presets": [],
    }


def checkpoint_folders(model_roots: Sequence[str]) -> list[Path]:
    """Folders directly under ``model_roots`` holding a ``config.json``, as the presets find them."""
    found: list[Path] = []
    for root in model_roots:
        folder = Path(root).expanduser()
        if folder.is_dir():
            found += [c.resolve() for c in sorted(folder.iterdir()) if (c / "config.json").is_file()]
    return found


def list_models(*, real: bool, model_roots: Sequence[str], presets: Sequence[Preset]) -> list[dict[str, Any]]:
    """Every model a spec may name in this mode, catalogue (or tiny) models first, then the
    checkpoints; a checkpoint whose ``config.json`` cannot be read is left out (a submit naming
    it says why)."""
    entries = [
        _entry(m, "tiny" if m.name.startswith(TINY_PREFIX) else "catalogue", m.name)
        for m in MODEL_CATALOGUE.values()
        if m.name.startswith(TINY_PREFIX) == real
    ]
    for folder in checkpoint_folders(model_roots):
        try:
            described = model_from_checkpoint_dir(str(folder))
        except CheckpointProblem:
            continue
        entries.append(_entry(described, "checkpoint", {"path": str(folder)}))
    for preset in presets:
        for entry in entries:
            if _names(preset.spec.get("model"), entry["model"]):
                entry["presets"].append(preset.name)
    return entries


def _names(value: Any, model: str | Mapping[str, str]) -> bool:
    """Whether a preset's ``model`` value names ``model``."""
    if isinstance(model, str):
        return isinstance(value, str) and value == model
    return isinstance(value, Mapping) and value.get("path") == model["path"]
