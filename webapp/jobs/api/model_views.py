"""``GET /api/v1/models``: what a job can train here, for the submit form's model picker."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp import engine_gateway
from webapp.api.inputs import KnownQueryOnly
from webapp.api.schema import results_of


class ModelOutput(serializers.Serializer):
    name = serializers.CharField()
    # A string, not a choice: another serializer's "kind" enum would be renamed beside it.
    kind = serializers.CharField(
        help_text="catalogue: a full-size model the simulator times; tiny: built and trained on this "
        "machine (real mode); checkpoint: a folder under the operator's model roots."
    )
    model = serializers.JSONField(help_text='What a spec\'s "model" takes: the name, or {"path": ...}.')
    num_params = serializers.FloatField()
    num_layers = serializers.IntegerField()
    hidden_size = serializers.IntegerField()
    architecture = serializers.CharField(allow_null=True, help_text="A checkpoint's family (qwen2, qwen3, llama...).")
    presets = serializers.ListField(child=serializers.CharField(), help_text="Presets that train it.")


class ModelsView(KnownQueryOnly, APIView):
    """The models a spec may name in the engine's mode, each as the spec spells it."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="models_list", responses=results_of("ModelList", ModelOutput(many=True)))
    def get(self, request: Request) -> Response:
        return Response({"results": ModelOutput(engine_gateway.list_models(), many=True).data})
