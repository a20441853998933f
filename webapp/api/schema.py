"""Schema helpers for responses the views wrap: ``{"results": [...]}`` lists (with ``next`` and
``previous`` links where a view pages), documented as the wrapper they are rather than a bare
array."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers


def results_of(name: str, item: serializers.Serializer[Any], *, paged: bool = False) -> Any:
    fields: dict[str, serializers.Field[Any, Any, Any, Any]] = {"results": item}
    if paged:
        fields["next"] = serializers.URLField(allow_null=True, help_text="The next page; null on the last.")
        fields["previous"] = serializers.URLField(allow_null=True, help_text="The previous page; null on the first.")
    return inline_serializer(name=name, fields=fields)
