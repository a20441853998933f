"""A typed Python client for the JigsawRL jobs API, and the ``jigsaw jobs`` command line.

    from jigsaw_client import JigsawClient

    with JigsawClient("http://127.0.0.1:8000", token="jrl_...") as client:
        job = client.submit_job({"model": "qwen3-0.6b", "workload": "gsm8k"}, name="gsm8k")
        print(client.get_job(job["id"])["status"])

Talks HTTP only (httpx): it never imports the control plane or the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jigsaw_client.client import DEFAULT_URL, JigsawClient
    from jigsaw_client.download import DownloadedModel, DownloadError
    from jigsaw_client.errors import ApiError, ClientError, ConnectionFailed
    from jigsaw_client.estimates import JobAccuracy, JobEstimate
    from jigsaw_client.models import TERMINAL_STATUSES, Checkpoint, Job, JobEvent, LogLine, LogPage, Quota

# Loaded on first use: the ``jigsaw`` console script imports ``jigsaw_client.entry`` in
# environments without httpx, where only the engine's commands are wanted.
_EXPORTS = {
    "DEFAULT_URL": "client",
    "JigsawClient": "client",
    "ApiError": "errors",
    "ClientError": "errors",
    "ConnectionFailed": "errors",
    "DownloadError": "download",
    "DownloadedModel": "download",
    "Checkpoint": "models",
    "TERMINAL_STATUSES": "models",
    "Job": "models",
    "JobAccuracy": "estimates",
    "JobEstimate": "estimates",
    "JobEvent": "models",
    "LogLine": "models",
    "LogPage": "models",
    "Quota": "models",
}

__all__ = [
    "DEFAULT_URL",
    "TERMINAL_STATUSES",
    "ApiError",
    "Checkpoint",
    "ClientError",
    "ConnectionFailed",
    "DownloadError",
    "DownloadedModel",
    "JigsawClient",
    "Job",
    "JobAccuracy",
    "JobEstimate",
    "JobEvent",
    "LogLine",
    "LogPage",
    "Quota",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'jigsaw_client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"jigsaw_client.{_EXPORTS[name]}"), name)
