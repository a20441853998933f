"""Reading a pipeline spec file: YAML or JSON (``-`` reads standard input)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


class SpecFileError(Exception):
    pass


def load_spec(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecFileError(f"{path}: not a text file (not UTF-8 at byte {exc.start}); expected YAML or JSON") from None
    except OSError as exc:
        raise SpecFileError(f"{path}: {exc.strerror or exc}") from None
    try:
        spec = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecFileError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'}: {exc}") from None
    if spec is None:
        raise SpecFileError(f"{path}: is empty; expected a pipeline spec (a mapping)")
    if not isinstance(spec, dict):
        raise SpecFileError(f"{path}: must hold a mapping (the pipeline spec), got {type(spec).__name__}")
    return spec
