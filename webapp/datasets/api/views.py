"""Datasets API: upload (JSON or multipart), list, show with a preview, delete; a grader dry run.

Tenant-scoped like the jobs API: another tenant's dataset name answers 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api.inputs import KnownQueryOnly, unknown_name
from webapp.api.parsers import StrictJSONParser
from webapp.api.schema import results_of
from webapp.api.tenancy import TenantScoped, resolve_tenant
from webapp.datasets import selectors, services
from webapp.datasets.api.serializers import (
    DatasetCreateInput,
    DatasetDetailOutput,
    DatasetOutput,
    DryRunResultOutput,
    GraderDryRunInput,
)
from webapp.datasets.models import Dataset

UPLOAD_OVERHEAD_BYTES = 1024 * 1024
"""Room for a request's envelope (JSON escaping, multipart headers) beyond the file itself."""
MULTIPART_FIELDS = ("file", "name")


def _dataset_or_404(request: Request, name: str) -> Dataset:
    tenant, _, _ = resolve_tenant(request)
    dataset = selectors.dataset_get_for_tenant(tenant=tenant, name=name)
    if dataset is None:
        raise NotFound()
    return dataset


class DatasetListView(KnownQueryOnly, APIView):
    """The tenant's datasets; POST uploads one (every row checked; 400 lists bad lines)."""

    permission_classes = [TenantScoped]
    parser_classes = [StrictJSONParser, MultiPartParser, FormParser]

    @staticmethod
    def max_body_bytes() -> int:
        """The request size webapp.api.request_limits allows here (413 past it, before parsing):
        a whole dataset, JSON-escaped at worst to twice its size, and the envelope."""
        return services.max_bytes() * 2 + UPLOAD_OVERHEAD_BYTES

    @extend_schema(operation_id="datasets_list", responses=results_of("DatasetList", DatasetOutput(many=True)))
    def get(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        return Response({"results": DatasetOutput(selectors.datasets_for_tenant(tenant=tenant), many=True).data})

    @extend_schema(request=DatasetCreateInput, responses={201: DatasetOutput})
    def post(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        upload = request.FILES.get("file") if request.content_type.startswith("multipart/") else None
        if upload is not None:
            extra = [k for k in request.data if k not in MULTIPART_FIELDS]
            if extra:
                raise ValidationError({k: [unknown_name(k, MULTIPART_FIELDS)] for k in extra})
            filename = upload.name or ""
            name = str(request.data.get("name") or services.name_from_filename(filename))
            content = services.read_limited(upload.chunks())
        else:
            body = DatasetCreateInput(data=request.data)
            if not body.is_valid():
                if request.content_type.startswith("multipart/"):
                    raise ValidationError({"file": ["send the JSONL file as the 'file' field"]})
                raise ValidationError(body.errors)
            filename = ""
            name = body.validated_data["name"]
            content = services.read_limited([body.validated_data["content"].encode("utf-8")])
        dataset = services.dataset_create(
            tenant=tenant, user=request.user, name=name, content=content, filename=filename
        )
        return Response(DatasetOutput(dataset).data, status=status.HTTP_201_CREATED)


class DatasetDetailView(KnownQueryOnly, APIView):
    permission_classes = [TenantScoped]

    @extend_schema(responses=DatasetDetailOutput)
    def get(self, request: Request, name: str) -> Response:
        dataset = _dataset_or_404(request, name)
        preview = [
            {"line": r.line, "prompt": r.prompt, "answer": r.answer}
            for r in services.dataset_head(dataset, services.PREVIEW_ROWS)
        ]
        return Response(DatasetDetailOutput(dataset, context={"preview": preview}).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        services.dataset_delete(dataset=_dataset_or_404(request, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class GraderDryRunView(KnownQueryOnly, APIView):
    """Grade a few rows (a stored dataset's first ones, or rows sent inline) as training would."""

    permission_classes = [TenantScoped]

    @extend_schema(request=GraderDryRunInput, responses=results_of("DryRunResultList", DryRunResultOutput(many=True)))
    def post(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        body = GraderDryRunInput(data=request.data)
        body.is_valid(raise_exception=True)
        data: dict[str, Any] = body.validated_data
        results = services.grader_dry_run(
            tenant=tenant,
            grader=data["grader"],
            dataset=data.get("dataset"),
            rows=data.get("rows"),
            completions=data.get("completions"),
        )
        return Response({"results": DryRunResultOutput(results, many=True).data})
