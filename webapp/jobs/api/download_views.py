"""GET /jobs/<id>/checkpoints/<step>/download: a checkpoint's model as a streamed tar.

A browser's download is a plain link (the browser writes the stream to disk; a fetch would
hold the whole model in the page's memory), and a link sends no ``X-Tenant`` header, so a
signed-in user may name the tenant as ``?tenant=`` instead. A token is bound to its tenant
and ignores both.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.api.inputs import KnownQueryOnly
from webapp.api.tenancy import TenantScoped, resolve_tenant
from webapp.jobs import selectors
from webapp.jobs.services.checkpoint_download import model_archive

TAR_MEDIA_TYPE = "application/x-tar"


class TarRenderer(BaseRenderer):
    media_type = TAR_MEDIA_TYPE
    format = "tar"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return JSONRenderer().render(data)  # errors only: the archive itself is streamed


class CheckpointDownloadView(KnownQueryOnly, APIView):
    permission_classes = [TenantScoped]
    renderer_classes = [JSONRenderer, TarRenderer]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        slug = request.query_params.get("tenant")
        if slug and "HTTP_X_TENANT" not in request.META:
            request.META["HTTP_X_TENANT"] = slug
            request._request.__dict__.pop("headers", None)  # read again, with the tenant
        super().initial(request, *args, **kwargs)

    @extend_schema(
        operation_id="jobs_checkpoint_download",
        parameters=[
            OpenApiParameter("step", OpenApiTypes.INT, OpenApiParameter.PATH, description="The checkpoint's step."),
            OpenApiParameter(
                "tenant",
                OpenApiTypes.STR,
                description="For a browser link, which sends no headers: the tenant slug X-Tenant would name.",
            ),
        ],
        responses={
            (200, TAR_MEDIA_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="An uncompressed tar of one folder, <job name>-step-<step>/, holding a Hugging "
                "Face directory: config.json, generation_config.json, model*.safetensors, tokenizer.json, "
                "tokenizer_config.json, chat_template.jinja. Streamed, with Content-Length.",
            ),
            404: OpenApiResponse(
                description="Not the caller's job, or no checkpoint at that step (code "
                "checkpoint_not_found; details name the steps there are)."
            ),
            409: OpenApiResponse(
                description="No weights to download (code no_weights): a simulated job, or a "
                "checkpoint written before checkpoints exported a model."
            ),
        },
        description="A checkpoint of a real job as a Hugging Face directory that transformers' "
        "AutoModelForCausalLM and AutoTokenizer load (with the chat template its prompts used).",
    )
    def get(self, request: Request, pk: str, step: str) -> StreamingHttpResponse:
        tenant, _, _ = resolve_tenant(request)
        job = selectors.job_get_for_tenant(tenant=tenant, job_id=pk)
        if job is None:
            raise NotFound()
        archive = model_archive(job=job, step=int(step))
        under_asgi = isinstance(request._request, ASGIRequest)
        response = StreamingHttpResponse(
            archive.async_chunks() if under_asgi else archive.chunks(), content_type=TAR_MEDIA_TYPE
        )
        response["Content-Length"] = str(archive.size)
        response["Content-Disposition"] = f'attachment; filename="{archive.filename}"'
        response["X-Accel-Buffering"] = "no"  # nginx: pass it on as it comes
        return response
