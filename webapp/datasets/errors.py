"""Errors the dataset services raise; rendered by the API's one error shape like the jobs' ones."""

from __future__ import annotations

from webapp.jobs.errors import ServiceError


class DatasetInvalid(ServiceError):
    code = "dataset_invalid"
    http_status = 400


class DatasetTooLarge(ServiceError):
    code = "dataset_too_large"
    http_status = 413


class DatasetExists(ServiceError):
    code = "dataset_exists"
    http_status = 409


class DatasetInUse(ServiceError):
    code = "dataset_in_use"
    http_status = 409
