"""``JigsawClient``: the jobs API over HTTP, one method per route, typed by the schema's shapes.

Retries: a request that never reached the server (connection refused, connect timeout) is
always retried; one whose answer was lost is retried only when sending it again cannot do
the work twice (``Route.retry_safe``). A submit carries one ``Idempotency-Key`` through all
its attempts, so the server replays the first attempt's answer instead of creating a second job.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import httpx

from jigsaw_client import routes
from jigsaw_client.download import DownloadedModel, Progress, check_destination, extract_model
from jigsaw_client.errors import ApiError, ConnectionFailed, UnexpectedResponse
from jigsaw_client.estimates import JobAccuracy, JobEstimate
from jigsaw_client.models import Checkpoint, CheckpointPage, EventPage, Job, JobEvent, JobPage, LogPage, Quota
from jigsaw_client.rewards import Reward, RewardPage
from jigsaw_client.routes import Route

DEFAULT_URL = "http://127.0.0.1:8000"
OPENAPI_JSON = "application/vnd.oai.openapi+json"
USER_AGENT = "jigsaw-client/0.1.0"

# Answers worth waiting out: overload and gateways, and a submit whose first attempt the
# server is still working on (it answers 409 idempotency_in_flight until that one finishes).
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_IN_FLIGHT = "idempotency_in_flight"
_MAX_WAIT_S = 30.0

log = logging.getLogger(__name__)


def _check_url(url: str) -> None:
    """A ValueError saying what is wrong with a server URL, before any request is tried."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"server URL must start with http:// or https://, got {url!r}")
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # reading the port checks it is a number in range
    except ValueError as exc:
        raise ValueError(f"not a valid server URL ({exc}), got {url!r}") from None
    if not host:
        raise ValueError(f"server URL has no host, got {url!r}")


class JigsawClient:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        _check_url(base_url)
        self.base_url = base_url.rstrip("/")
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport)
        self._retries = retries
        self._backoff_s = backoff_s
        self._sleep = sleep

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> JigsawClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- jobs --------------------------------------------------------------------------------
    def submit_job(self, spec: Mapping[str, Any], *, name: str = "", idempotency_key: str | None = None) -> Job:
        """Create a job; pass your own ``idempotency_key`` to make a resubmission safe too."""
        key = idempotency_key or str(uuid.uuid4())
        body = {"name": name, "spec": dict(spec)}
        return cast(Job, self._call(routes.JOB_SUBMIT, body=body, headers={"Idempotency-Key": key}))

    def estimate_job(self, spec: Mapping[str, Any], *, name: str = "") -> JobEstimate:
        """What submitting ``spec`` now would take, cost and meet (the simulator's forecast on
        the server's cluster, the queue wait, what quota or budget would block it); nothing is
        created. A bad spec raises the ``ApiError`` a submit would."""
        return cast(JobEstimate, self._call(routes.JOB_ESTIMATE, body={"name": name, "spec": dict(spec)}))

    def list_jobs(self, *, statuses: Sequence[str] = (), page_size: int | None = None) -> Iterator[Job]:
        """The tenant's jobs, newest first, fetching further pages as the caller iterates."""
        params: dict[str, str] = {}
        if statuses:
            params["status"] = ",".join(statuses)
        if page_size is not None:
            params["page_size"] = str(page_size)
        while True:
            page = cast(JobPage, self._call(routes.JOBS_LIST, params=params))
            yield from page["results"]
            cursor = _cursor_of(page.get("next"))
            if cursor is None:
                return
            # Follow the cursor, not the absolute ``next`` URL: behind a proxy its host may not be ours.
            params = {**params, "cursor": cursor}

    def get_job(self, job_id: str) -> Job:
        return cast(Job, self._call(routes.JOB_GET, id=job_id))

    def job_accuracy(self, job_id: str) -> JobAccuracy:
        """An ended job's estimate beside its run, with the errors; ``ApiError`` 409 while it runs."""
        return cast(JobAccuracy, self._call(routes.JOB_ACCURACY, id=job_id))

    def cancel_job(self, job_id: str) -> Job:
        return cast(Job, self._call(routes.JOB_CANCEL, id=job_id))

    def delete_job(self, job_id: str) -> None:
        """Delete an ended job with its checkpoints, samples and logs (its usage stays billed).
        ApiError 409 ``invalid_state`` if it has not ended (cancel it first), 404 if it is gone."""
        self._call(routes.JOB_DELETE, id=job_id)

    def job_logs(self, job_id: str, *, after: int = 0) -> LogPage:
        """Log lines with a seq above ``after`` (a page of up to 1000)."""
        return cast(LogPage, self._call(routes.JOB_LOGS, id=job_id, params={"after": str(after)}))

    def job_events(self, job_id: str, *, after: int = 0) -> list[JobEvent]:
        """Status, metrics and log events with a seq above ``after``, in order."""
        page = cast(EventPage, self._call(routes.JOB_EVENTS, id=job_id, params={"after": str(after)}))
        return page["results"]

    def list_checkpoints(self, job_id: str) -> list[Checkpoint]:
        """The steps a job can be resumed, cloned or downloaded from, oldest first."""
        page = cast(CheckpointPage, self._call(routes.JOB_CHECKPOINTS, id=job_id))
        return page["results"]

    def latest_checkpoint_step(self, job_id: str) -> int:
        """The job's latest checkpoint's step; ``ApiError`` 404 when it has none yet."""
        steps = [c["step"] for c in self.list_checkpoints(job_id)]
        if not steps:
            raise ApiError(404, "checkpoint_not_found", f"job {job_id} has no checkpoint yet")
        return max(steps)

    def download_checkpoint(
        self, job_id: str, out: str | Path, *, step: int | None = None, progress: Progress | None = None
    ) -> DownloadedModel:
        """A real job's checkpoint (default: its latest) as a Hugging Face directory in ``out``
        (absent or empty), streamed: ``progress(received, total)`` as it comes. ``ApiError`` 409
        ``no_weights`` for a simulated job, 404 ``checkpoint_not_found`` naming the steps there are."""
        out = Path(out)
        check_destination(out)
        if step is None:
            step = self.latest_checkpoint_step(job_id)
        path = routes.JOB_CHECKPOINT_DOWNLOAD.path(id=job_id, step=str(step))
        # No read timeout between chunks beyond the client's own; a model takes as long as it takes.
        try:
            with self._http.stream("GET", path, headers={"Accept": "application/x-tar"}) as response:
                if not response.is_success:
                    response.read()
                    raise ApiError.from_response(response)
                length = response.headers.get("Content-Length", "")
                total = int(length) if length.isdigit() else None
                return extract_model(response.iter_raw(), out, step=step, total=total, progress=progress)
        except httpx.TransportError as exc:
            raise ConnectionFailed(self.base_url + path, _describe(exc)) from exc

    # -- account and schema ------------------------------------------------------------------
    def quota(self) -> Quota:
        return cast(Quota, self._call(routes.QUOTA))

    def rewards(self) -> list[Reward]:
        """The rewards a spec's ``data.grader`` may name here: the built-in graders and those
        the operator installed, each with what it suits and its time limit."""
        return cast(RewardPage, self._call(routes.REWARDS))["results"]

    def schema(self) -> dict[str, Any]:
        """The server's OpenAPI document."""
        return self._call(routes.SCHEMA, headers={"Accept": OPENAPI_JSON})

    # -- transport ---------------------------------------------------------------------------
    def _call(
        self,
        route: Route,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        **path_params: str,
    ) -> dict[str, Any]:
        path = route.path(**path_params)
        url = self.base_url + path
        for attempt in range(self._retries + 1):
            last = attempt == self._retries
            try:
                response = self._http.request(route.method, path, params=params, json=body, headers=headers)
            except httpx.TransportError as exc:
                never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if last or not (never_sent or route.retry_safe):
                    raise ConnectionFailed(url, _describe(exc)) from exc
                wait_s = self._backoff(attempt)
                log.warning("%s %s: %s; retrying in %.1f s", route.method, url, _describe(exc), wait_s)
                self._sleep(wait_s)
                continue
            if response.is_success:
                return {} if response.status_code == 204 else _json_object(url, response)
            error = ApiError.from_response(response)
            if last or not _worth_retrying(route, error):
                raise error
            wait_s = _retry_after(response) or self._backoff(attempt)
            log.warning("%s %s: HTTP %d %s; retrying in %.1f s", route.method, url, error.status, error.code, wait_s)
            self._sleep(wait_s)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _backoff(self, attempt: int) -> float:
        return float(min(self._backoff_s * 2**attempt, _MAX_WAIT_S))


def _worth_retrying(route: Route, error: ApiError) -> bool:
    return route.retry_safe and (error.status in _RETRY_STATUSES or error.code == _IN_FLIGHT)


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After", "")
    return min(float(raw), _MAX_WAIT_S) if raw.isdigit() else None


def _json_object(url: str, response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise UnexpectedResponse(url, response.text) from None
    if not isinstance(body, dict):
        raise UnexpectedResponse(url, body)
    return body


def _cursor_of(next_url: str | None) -> str | None:
    if not next_url:
        return None
    return parse_qs(urlsplit(next_url).query).get("cursor", [None])[0]


def _describe(exc: httpx.TransportError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
