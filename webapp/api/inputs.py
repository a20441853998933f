"""What the API reads from a request, refused by name when it is not understood: a misspelt
body field or query parameter that is silently dropped answers another request than the one
sent (``?state=running`` lists every job, ``{"priority": 4}`` beside the spec submits at the
default priority). Each is a 400 in the one error shape naming it, with the closest known name,
as the engine reports an unknown field inside a spec.

- :class:`KnownFieldsOnly`: a serializer mixin refusing body fields it does not declare
  (nested serializers and list items too, with their paths);
- :class:`KnownQueryOnly`: a view mixin refusing query parameters the handler does not
  document in its ``extend_schema`` (or its paginator's), so the schema and the check cannot
  disagree; ``format`` must name one of the view's renderers;
- :class:`StrictCursorPagination`: a bad ``cursor`` or ``page_size`` is a 400, not a 404 or
  the default page;
- :func:`int_param`: an integer query parameter within bounds, or a 400 naming it.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import CursorPagination
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.settings import api_settings


def unknown_name(name: str, known: Collection[str], *, kind: str = "field", plural: str = "fields") -> str:
    """``unknown field; did you mean 'n'?``, as the engine words a spec's unknown keys."""
    choices = sorted(known)
    close = difflib.get_close_matches(name, choices, n=1)
    if close:
        return f"unknown {kind}; did you mean {close[0]!r}?"
    if not choices:
        return f"unknown {kind}; this request takes no {plural}"
    return f"unknown {kind}; known {plural}: {', '.join(choices)}"


def unknown_query_param(name: str, known: Collection[str]) -> str:
    return unknown_name(name, known, kind="query parameter", plural="query parameters")


# -- bodies -----------------------------------------------------------------------------------
# A ``Serializer`` mixin. Every problem is reported at once: the unknown names beside the
# declared fields' own errors. (A comment, not a docstring: the OpenAPI schema would take it as
# the description of every serializer that uses it; the same for KnownQueryOnly and views.)
class KnownFieldsOnly:
    fields: dict[str, serializers.Field[Any, Any, Any, Any]]

    def to_internal_value(self, data: Any) -> Any:
        unknown = {}
        if isinstance(data, Mapping):
            unknown = {str(name): [self.unknown_field(str(name))] for name in data if name not in self.fields}
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if not unknown or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**exc.detail, **unknown}) from None
        if unknown:
            raise serializers.ValidationError(unknown)
        return value

    def unknown_field(self, name: str) -> str:
        """The message for ``name``; a serializer may know a better suggestion."""
        return unknown_name(name, [n for n, f in self.fields.items() if not f.read_only])


class KnownFieldsSchema(OpenApiSerializerExtension):
    """The schema says so too (``additionalProperties: false``): clients and generated
    requests know the fields are all there is."""

    target_class = KnownFieldsOnly
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": False}


class NoBody(KnownFieldsOnly, serializers.Serializer[Any]):
    pass


def refuse_body(request: Request) -> None:
    """For actions that take no body: whatever was sent would otherwise be ignored."""
    if request.data:
        NoBody(data=request.data).is_valid(raise_exception=True)


# -- query parameters -------------------------------------------------------------------------
def int_param(request: Request, name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: [f"must be an integer, got {raw!r}"]}) from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ValidationError({name: [f"must be {bound}, got {value}"]})
    return value


class FormatNegotiation(DefaultContentNegotiation):
    """``?format=`` naming no renderer of the view is a 400 naming it (DRF answers 404)."""

    def filter_renderers(self, renderers: list[BaseRenderer], format: str) -> list[BaseRenderer]:
        found = [r for r in renderers if r.format == format]
        if not found:
            formats = ", ".join(dict.fromkeys(str(r.format) for r in renderers))
            raise ValidationError({api_settings.URL_FORMAT_OVERRIDE: [f"must be one of {formats}; got {format!r}"]})
        return found


_documented: dict[tuple[type, str, str], frozenset[str]] = {}


def documented_query_params(view: Any, request: Request) -> frozenset[str]:
    """The query parameters the schema documents for this handler: its ``extend_schema``
    parameters, and for a paged list its paginator's."""
    handler = getattr(view, "action", None) or request.method.lower()
    key = (type(view), handler, request.method)
    names = _documented.get(key)
    if names is None:
        found: set[str] = set()
        schema_class = getattr(getattr(view, handler, None), "kwargs", {}).get("schema")
        if schema_class is not None:
            schema = schema_class()
            schema.view, schema.method = view, request.method
            for param in schema.get_override_parameters():
                if isinstance(param, OpenApiParameter) and param.location == OpenApiParameter.QUERY:
                    found.add(param.name)
        paginator = getattr(view, "paginator", None) if handler == "list" else None
        if paginator is not None:
            found.update(p["name"] for p in paginator.get_schema_operation_parameters(view) if p["in"] == "query")
        names = _documented[key] = frozenset(found)
    return names


# An ``APIView`` mixin: query parameters the handler does not document are refused, all of them
# at once; ``format`` (DRF's, every view's) must name one of the view's renderers.
class KnownQueryOnly:
    content_negotiation_class = FormatNegotiation

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        known = documented_query_params(self, request)
        unknown = [n for n in request.query_params if n not in known and n != api_settings.URL_FORMAT_OVERRIDE]
        if unknown:
            raise ValidationError({n: [unknown_query_param(n, known)] for n in unknown})


class StrictCursorPagination(CursorPagination):
    """A cursor this list did not give out, or a ``page_size`` out of bounds, is a 400 naming
    it: DRF answers 404 for the one and quietly serves the default page for the other."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    _bad_cursor = "is not a cursor this list gave out; follow the next and previous links as they are"

    def get_page_size(self, request: Request) -> int:
        assert self.page_size_query_param is not None and self.page_size is not None
        return int_param(request, self.page_size_query_param, self.page_size, minimum=1, maximum=self.max_page_size)

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: [self._bad_cursor]}) from None

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        try:
            return super().paginate_queryset(queryset, request, view)
        except DjangoValidationError:  # a well-formed cursor whose position is no value of the ordering
            raise ValidationError({self.cursor_query_param: [self._bad_cursor]}) from None
