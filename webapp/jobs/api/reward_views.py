"""``GET /api/v1/rewards``: the reward functions installed here, for a spec's ``data.grader``."""

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


class RewardOutput(serializers.Serializer):
    name = serializers.CharField(help_text='What a spec\'s "data.grader" names to be scored by it.')
    description = serializers.CharField(help_text="What earns reward.")
    suits = serializers.CharField(help_text="The tasks and datasets it is meant for.")
    time_limit_s = serializers.FloatField(
        allow_null=True,
        help_text="Per reply: past it the reply scores 0 and the reason is in the job's samples. "
        "Null: a built-in grader that runs in the environment's own process.",
    )
    builtin = serializers.BooleanField(help_text="Shipped with the service (else installed by the operator).")
    source = serializers.CharField(help_text="The entry point and the package that installed it.")


class RewardsView(KnownQueryOnly, APIView):
    """The rewards a spec may choose, the built-in graders first (the operator installs others
    as ``jigsawrl.rewards`` entry points; tenants choose among them and never send code)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="rewards_list", responses=results_of("RewardList", RewardOutput(many=True)))
    def get(self, request: Request) -> Response:
        return Response({"results": RewardOutput(engine_gateway.list_rewards(), many=True).data})
