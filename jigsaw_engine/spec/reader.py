"""Reads a user's mapping field by field, collecting every problem with its field path.

Parsing never stops at the first problem: a user fixing a spec wants the whole list at once.
Unknown keys are reported too (with the closest known name), because a misspelt knob that is
silently ignored costs a GPU-day.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from jigsaw_engine.errors import FieldError

T = TypeVar("T")
_MISSING: Any = object()


def join_path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


class SpecReader:
    """A view of one mapping at ``path``; typed getters append to the shared ``errors``."""

    def __init__(self, data: Any, path: str, errors: list[FieldError]) -> None:
        self.path = path
        self.errors = errors
        self._seen: set[str] = set()
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.error("", f"must be a mapping, got {type(data).__name__}")
            data = {}
        self.data: Mapping[str, Any] = data

    # -- reporting ---------------------------------------------------------------------
    def field_path(self, key: str | int) -> str:
        return join_path(self.path, key) if key != "" else self.path or "<root>"

    def error(self, key: str | int, message: str) -> None:
        self.errors.append(FieldError(self.field_path(key), message))

    # -- getters -----------------------------------------------------------------------
    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self._seen.add(key)
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            self.error(key, "is required")
        return default

    def section(self, key: str) -> SpecReader:
        return SpecReader(self.raw(key, {}), self.field_path(key), self.errors)

    def integer(self, key: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(key, f"must be an integer, got {value!r}")
            return default
        return self._bounded(key, value, minimum, maximum, default)

    def number(
        self,
        key: str,
        default: float,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(key, f"must be a number, got {value!r}")
            return default
        return float(self._bounded(key, value, minimum, maximum, default))

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            self.error(key, f"must be true or false, got {value!r}")
            return default
        return value

    def text(self, key: str, default: str, *, max_length: int = 200) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            self.error(key, f"must be a string, got {value!r}")
            return default
        if len(value) > max_length:
            self.error(key, f"must be at most {max_length} characters, got {len(value)}")
            return value[:max_length]
        return value

    def choice(self, key: str, default: str, choices: Sequence[str]) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or value.lower() not in choices:
            hint = ""
            if isinstance(value, str):
                close = difflib.get_close_matches(value.lower(), choices, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.error(key, f"must be one of {', '.join(choices)}; got {value!r}{hint}")
            return default
        return value.lower()

    def finish(self) -> None:
        """Report keys the caller never asked for: they would otherwise be silently ignored."""
        known = sorted(self._seen)
        for key in self.data:
            if key in self._seen:
                continue
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(known)}"
            self.error(str(key), f"unknown field{hint}")

    # -- helpers -----------------------------------------------------------------------
    def _bounded(
        self,
        key: str,
        value: T,
        minimum: float | None,
        maximum: float | None,
        default: T,
    ) -> T:
        if minimum is not None and value < minimum:  # type: ignore[operator]
            self.error(key, f"must be >= {minimum}, got {value}")
            return default
        if maximum is not None and value > maximum:  # type: ignore[operator]
            self.error(key, f"must be <= {maximum}, got {value}")
            return default
        return value
