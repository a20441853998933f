"""The API's JSON parser: DRF's, plus refusals for bodies that parse but cannot be stored or
walked safely. Each refusal is a 400 in the one error shape, naming where in the body it is.

- nesting deeper than ``MAX_JSON_DEPTH``: no spec needs it, and recursive code further on
  (validation, merging overrides, the database's JSON functions) would fail on it;
- NUL characters and unpaired surrogates in strings or keys: Postgres cannot store either
  (text and jsonb refuse them), so they would otherwise fail as a server error on save.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import JSONParser
from rest_framework.utils import json  # NaN and Infinity refused, as DRF's own parser does

MAX_JSON_DEPTH = 32
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class BodyInvalid(exceptions.ParseError):
    """A 400 with the field it is about (``exc.field``), rendered with details by the handler."""

    def __init__(self, message: str, field: str = "<body>") -> None:
        super().__init__(message)
        self.field = field


def _where(path: str) -> str:
    return path or "<body>"


def check_json_value(value: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`BodyInvalid` for the first part of ``value`` too deep or unstorable.
    Iterative, so a deep value cannot exhaust the stack here."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                raise BodyInvalid("strings may not hold NUL characters or unpaired surrogates", _where(path))
            continue
        if not isinstance(item, Mapping | list):
            continue
        if depth > max_depth:
            raise BodyInvalid(f"JSON may nest at most {max_depth} levels deep", _where(path))
        if isinstance(item, Mapping):
            for key, child in item.items():
                if _UNSTORABLE.search(key):
                    raise BodyInvalid("keys may not hold NUL characters or unpaired surrogates", _where(path))
                stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
        else:
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
        except UnicodeDecodeError as exc:
            raise BodyInvalid(f"the body is not valid {encoding}: {exc.reason} at byte {exc.start}") from None
        try:
            value = json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except RecursionError:
            raise BodyInvalid(f"JSON may nest at most {MAX_JSON_DEPTH} levels deep") from None
        except ValueError as exc:
            raise BodyInvalid(f"the body is not valid JSON: {exc}") from None
        check_json_value(value)
        return value
