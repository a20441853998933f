"""Errors the jobs services raise; the API renders each with its code and HTTP status."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    code = "error"
    http_status = 400

    def __init__(self, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


class SpecInvalid(ServiceError):
    code = "validation_error"
    http_status = 400


class QuotaExceeded(ServiceError):
    code = "quota_exceeded"
    http_status = 422


class BudgetExhausted(ServiceError):
    code = "budget_exhausted"
    http_status = 422


class InvalidTransition(ServiceError):
    code = "invalid_state"
    http_status = 409


class IdempotencyInFlight(ServiceError):
    code = "idempotency_in_flight"
    http_status = 409


class IdempotencyMismatch(ServiceError):
    code = "idempotency_key_reused"
    http_status = 422


class CheckpointNotFound(ServiceError):
    code = "checkpoint_not_found"
    http_status = 404


class NoWeights(ServiceError):
    """The checkpoint exists as a step to resume from, but there is no model to take out."""

    code = "no_weights"
    http_status = 409
