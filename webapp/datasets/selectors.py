"""Reads for datasets. Every read goes through a tenant filter."""

from __future__ import annotations

from django.db.models import QuerySet

from tenants.models import Tenant
from webapp.datasets.models import Dataset


def datasets_for_tenant(*, tenant: Tenant) -> QuerySet[Dataset]:
    return Dataset.objects.filter(tenant=tenant).select_related("created_by")


def dataset_get_for_tenant(*, tenant: Tenant, name: str) -> Dataset | None:
    return datasets_for_tenant(tenant=tenant).filter(name=name).first()
