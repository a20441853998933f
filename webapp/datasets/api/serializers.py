"""Input and output serializers for datasets and grader dry runs."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from webapp.api.inputs import KnownFieldsOnly
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_ref


class DatasetCreateInput(KnownFieldsOnly, serializers.Serializer):
    """JSON upload; a multipart upload sends ``file`` (and optionally ``name``) instead."""

    name = serializers.CharField(max_length=200, trim_whitespace=False)
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, help_text="The JSONL text.")


class DatasetOutput(serializers.ModelSerializer[Dataset]):
    ref = serializers.SerializerMethodField(help_text='What data.train_files takes: "dataset:<name>".')
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = Dataset
        fields = ("name", "ref", "rows", "size_bytes", "sha256", "created_by", "created_at")

    def get_ref(self, obj: Dataset) -> str:
        return dataset_ref(obj.name)

    def get_created_by(self, obj: Dataset) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None


class DatasetRowOutput(serializers.Serializer):
    line = serializers.IntegerField()
    prompt = serializers.CharField()
    answer = serializers.CharField()


class DatasetDetailOutput(DatasetOutput):
    preview = serializers.SerializerMethodField()

    class Meta(DatasetOutput.Meta):
        fields = (*DatasetOutput.Meta.fields, "preview")

    def get_preview(self, obj: Dataset) -> list[dict[str, Any]]:
        return list(self.context.get("preview", []))


class DryRunRowInput(KnownFieldsOnly, serializers.Serializer):
    prompt = serializers.CharField(trim_whitespace=False)
    answer = serializers.CharField()


class GraderDryRunInput(KnownFieldsOnly, serializers.Serializer):
    grader = serializers.CharField(max_length=40)
    dataset = serializers.CharField(max_length=200, required=False)
    rows = DryRunRowInput(many=True, required=False, max_length=20)
    completions = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000),
        required=False,
        max_length=20,
        help_text="One per row, in order; default: each row's answer as '#### <answer>' (a perfect reply).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("dataset" in attrs) == ("rows" in attrs):
            raise serializers.ValidationError({"dataset": ["send either dataset (a name) or rows, not both"]})
        if "rows" in attrs and not attrs["rows"]:
            raise serializers.ValidationError({"rows": ["must hold at least one row"]})
        return attrs


class DryRunResultOutput(serializers.Serializer):
    line = serializers.IntegerField()
    prompt = serializers.CharField()
    answer = serializers.CharField()
    completion = serializers.CharField()
    reward = serializers.FloatField()
    reward_error = serializers.CharField(
        help_text="Why the reward could not score this completion (it raised, ran past its time limit, "
        "returned no number), as it would fail in training, scoring 0; empty when it scored."
    )
    problem = serializers.CharField(allow_null=True, help_text="Why the grader can never reward this answer.")
