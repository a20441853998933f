"""The demo's jobs: the first ones each tenant submits, and those that keep arriving while it
runs, submitted through the REST API with the tenants' own tokens as their clients would."""

from __future__ import annotations

import sys
import time
import urllib.error
from collections.abc import Callable
from typing import Any

from devstack.launcher import api_json
from jigsaw_client.trickle import UNFINISHED_STATUSES, Trickle, TrickleJob

# --real: the same kinds of job, tiny, trained for real on this machine's cores.
REAL_DEMO_JOBS = [
    ("acme", "math-grpo", {"trainer": {"total_steps": 40}}),
    ("globex", "self-refine", {"trainer": {"total_steps": 30}}),
    ("acme", "retrieval-qa", {"trainer": {"total_steps": 20}}),
]

DEMO_JOBS = [
    ("acme", "math-grpo", {"trainer": {"total_steps": 30}}),
    ("acme", "retrieval-qa", {"data": {"train_batch_size": 32}, "trainer": {"total_steps": 15}}),
    ("globex", "self-refine", {"data": {"train_batch_size": 16}, "trainer": {"total_steps": 8}}),
    ("globex", "math-grpo", {"name": "gsm8k-grpo-large", "model": "qwen3-4b", "resources": {"num_gpus": 4}}),
]

MAX_IN_FLIGHT = 200  # a tenant's unfinished jobs are counted from one page of the jobs list

# The jobs that keep arriving while the demo runs: the presets and the pipelines of
# examples/mix-small.yaml, mostly 1 or 2 GPUs and one of 4 per tenant, 15-40 s each at the
# demo's engine speed. A tenant may hold 6 of the 8 GPUs and run 3 jobs, so some wait.
TRICKLE_JOBS = [
    TrickleJob("acme", "math-grpo", {"trainer": {"total_steps": 30}}),
    TrickleJob("acme", "math-grpo", {"name": "gsm8k-grpo-1gpu", "resources": {"num_gpus": 1}}),
    TrickleJob(
        "acme",
        "retrieval-qa",
        {"name": "search-llama-8b", "resources": {"num_gpus": 4}, "trainer": {"total_steps": 10}},
    ),
    TrickleJob("acme", "retrieval-qa", {"data": {"train_batch_size": 32}, "trainer": {"total_steps": 10}}),
    TrickleJob("globex", "math-grpo", {"name": "gsm8k-qwen3-4b", "model": "qwen3-4b", "trainer": {"total_steps": 20}}),
    TrickleJob("globex", "self-refine", {"data": {"train_batch_size": 16}, "trainer": {"total_steps": 4}}),
    TrickleJob("globex", "math-grpo", {"name": "math-qwen3-0.6b", "workload": "math"}),
    TrickleJob("globex", "retrieval-qa", {"data": {"train_batch_size": 32}, "trainer": {"total_steps": 10}}),
]
REAL_TRICKLE_JOBS = [
    TrickleJob("acme", "math-grpo", {"trainer": {"total_steps": 20}}),
    TrickleJob("acme", "retrieval-qa", {"trainer": {"total_steps": 15}}),
    TrickleJob("globex", "self-refine", {"trainer": {"total_steps": 15}}),
    TrickleJob("globex", "math-grpo", {"trainer": {"total_steps": 10}}),
]


def submit(base: str, token: str, spec: dict[str, Any], name: str = "") -> Any:
    return api_json(base, "POST", "/api/v1/jobs", token, {"name": name or spec["name"], "spec": spec})


def new_jobs_trickle(
    *, real: bool, jobs_per_minute: float, max_in_flight: int, max_jobs: int | None, minutes: float | None
) -> Trickle:
    now = time.monotonic()
    return Trickle(
        REAL_TRICKLE_JOBS if real else TRICKLE_JOBS,
        jobs_per_minute=jobs_per_minute,
        start=now + 60.0 / jobs_per_minute,  # the first jobs were just submitted
        max_in_flight=max_in_flight,
        max_jobs=max_jobs,
        stop_at=None if minutes is None else now + 60.0 * minutes,
    )


def trickle_round(trickle: Trickle, base: str, tokens: dict[str, str], presets: dict[str, dict[str, Any]]) -> bool:
    """Submit what is due, as the tenants' clients would (the REST API, their own tokens).
    False once the trickle is over."""
    now = time.monotonic()
    if trickle.finished(now):
        return False
    if not trickle.due(now):
        return True
    try:
        in_flight = {tenant: unfinished_jobs(base, tokens[tenant]) for tenant in trickle.tenants}
    except OSError as exc:  # the stack's own health is check_alive's business
        print(f"new jobs: could not count unfinished jobs ({exc}); trying again", file=sys.stderr, flush=True)
        trickle.defer(now)
        return True
    while (job := trickle.take(now, in_flight)) is not None:
        spec = {**presets[job.preset], **job.overrides}
        name = f"{spec['name']}-{trickle.handed_out}"
        try:
            submit(base, tokens[job.tenant], spec, name)
        except urllib.error.HTTPError as exc:  # e.g. the tenant's queue or budget is full: skip this one
            print(f"new jobs: [{job.tenant}] {name} refused: {exc.code} {exc.read()[:300]!r}", file=sys.stderr)
        except OSError as exc:
            print(f"new jobs: [{job.tenant}] {name} not submitted: {exc}", file=sys.stderr)
        in_flight[job.tenant] += 1
    return True


def unfinished_jobs(base: str, token: str) -> int:
    query = f"status={','.join(UNFINISHED_STATUSES)}&page_size={MAX_IN_FLIGHT}"
    return len(api_json(base, "GET", f"/api/v1/jobs?{query}", token)["results"])


def wait_running(
    base: str,
    tokens: dict[str, str],
    job_ids: list[tuple[str, str, str]],
    check_alive: Callable[[], None],
    timeout_s: float = 180,
) -> None:
    """Until at least two of the first jobs run (or ran); a failed one, or none in time, raises."""
    deadline = time.monotonic() + timeout_s
    states: list[str] = []
    while time.monotonic() < deadline:
        check_alive()
        states = [api_json(base, "GET", f"/api/v1/jobs/{jid}", tokens[t])["status"] for t, jid, _ in job_ids]
        if "failed" in states:
            raise RuntimeError(f"a demo job failed: {states}")
        if sum(s in ("running", "succeeded") for s in states) >= 2:
            return
        time.sleep(1)
    raise RuntimeError(f"jobs did not start: {states}")
