"""Every API route the client calls, spelled as the OpenAPI schema spells it.

The client builds URLs only from these, so a test can hold them against the live schema: a
route renamed on the server fails that test instead of failing users.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    template: str
    # True when sending it twice cannot do the work twice (GETs; a submit carries an
    # Idempotency-Key), so it may be retried after a response was lost on the way back.
    retry_safe: bool

    def path(self, **params: str) -> str:
        return self.template.format(**{name: quote(value, safe="") for name, value in params.items()})


JOBS_LIST = Route("GET", "/api/v1/jobs", retry_safe=True)
JOB_SUBMIT = Route("POST", "/api/v1/jobs", retry_safe=True)
JOB_ESTIMATE = Route("POST", "/api/v1/jobs/estimate", retry_safe=True)  # creates nothing
JOB_GET = Route("GET", "/api/v1/jobs/{id}", retry_safe=True)
JOB_ACCURACY = Route("GET", "/api/v1/jobs/{id}/estimate", retry_safe=True)
JOB_CANCEL = Route("POST", "/api/v1/jobs/{id}/cancel", retry_safe=False)
# Not retried: a resent delete of a deleted job answers 404, which would hide that it worked.
JOB_DELETE = Route("DELETE", "/api/v1/jobs/{id}", retry_safe=False)
JOB_LOGS = Route("GET", "/api/v1/jobs/{id}/logs", retry_safe=True)
JOB_EVENTS = Route("GET", "/api/v1/jobs/{id}/events", retry_safe=True)
JOB_CHECKPOINTS = Route("GET", "/api/v1/jobs/{id}/checkpoints", retry_safe=True)
JOB_CHECKPOINT_DOWNLOAD = Route("GET", "/api/v1/jobs/{id}/checkpoints/{step}/download", retry_safe=True)
QUOTA = Route("GET", "/api/v1/quota", retry_safe=True)
REWARDS = Route("GET", "/api/v1/rewards", retry_safe=True)

API_ROUTES: tuple[Route, ...] = (
    JOBS_LIST,
    JOB_SUBMIT,
    JOB_ESTIMATE,
    JOB_GET,
    JOB_ACCURACY,
    JOB_CANCEL,
    JOB_DELETE,
    JOB_LOGS,
    JOB_EVENTS,
    JOB_CHECKPOINTS,
    JOB_CHECKPOINT_DOWNLOAD,
    QUOTA,
    REWARDS,
)

# The schema does not list itself.
SCHEMA = Route("GET", "/api/v1/schema", retry_safe=True)
