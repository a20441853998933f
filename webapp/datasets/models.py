"""A tenant's uploaded JSONL datasets (``{"prompt", "answer"}`` per line) for ``data.train_files``."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenants.models import Tenant


class Dataset(models.Model):
    """Metadata of one stored file; the file lives at ``<DATASETS_DIR>/<tenant id>/<id>.jsonl``.

    The name never reaches the file system, so no name can point a path elsewhere.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=100)
    rows = models.PositiveIntegerField()
    size_bytes = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at", "name")
        constraints = [models.UniqueConstraint(fields=("tenant", "name"), name="dataset_name_unique_per_tenant")]

    def __str__(self) -> str:
        return f"{self.name} ({self.rows} rows)"
