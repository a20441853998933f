"""The benchmark's Django-side steps: seeding tenants and tokens, filling the jobs table, the
running jobs the sockets watch, the event publisher, the submitted jobs' outcomes. Each runs in
a child process set up like the server (``python -m devstack.bench.django_steps STEP JSON``),
so the benchmark itself never loads Django."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from devstack.bench.config import (
    BENCH_QUOTA,
    BENCH_SPEC,
    FINISHED,
    OTHER_TENANTS,
    RESULT_MARK,
    SENT_AT,
    STATUS_MIX,
    BenchError,
)
from devstack.bench.stats import latency_summary
from devstack.launcher import ROOT

CHILD = [sys.executable, "-m", "devstack.bench.django_steps"]


def run_step(env: dict[str, str], step: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one of ``DJANGO_STEPS`` in a child process set up like the server."""
    proc = subprocess.run(
        [*CHILD, step, json.dumps(args)], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    return _step_result(step, proc.returncode, proc.stdout, proc.stderr)


async def publish(
    env: dict[str, str], job_ids: list[str], duration_s: float, start_at: float, deadline: float | None = None
) -> dict[str, Any]:
    """The publisher runs in its own process, as the event pump does in a Celery worker."""
    args = json.dumps({"job_ids": job_ids, "duration": duration_s, "start_at": start_at, "deadline": deadline})
    proc = await asyncio.create_subprocess_exec(
        *CHILD,
        "publish",
        args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await proc.communicate()
    return _step_result("publish", proc.returncode, stdout.decode(), stderr.decode())


def _step_result(step: str, returncode: int | None, stdout: str, stderr: str) -> dict[str, Any]:
    results = [line for line in stdout.splitlines() if line.startswith(RESULT_MARK)]
    if returncode != 0 or not results:
        raise BenchError(f"step {step} failed (exit {returncode}):\n{stderr[-4000:]}")
    parsed: dict[str, Any] = json.loads(results[-1][len(RESULT_MARK) :])
    return parsed


# -- in the child ---------------------------------------------------------------------------------
def step_seed(args: dict[str, Any]) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tenants.models import Role
    from tenants.services import api_token_create, membership_add, tenant_create

    user = get_user_model().objects.create_user(username="bench", password=None)
    bench = tenant_create(slug="bench", name="Benchmark", quota=BENCH_QUOTA)
    membership_add(tenant=bench, user=user, role=Role.MEMBER)
    for i in range(1, OTHER_TENANTS + 1):
        tenant_create(slug=f"bench-other-{i}", name=f"Other tenant {i}", quota=BENCH_QUOTA)
    # One token per client: the rate limiter counts per token, as it would count real callers.
    tokens = [api_token_create(tenant=bench, user=user, name=f"bench client {i}")[1] for i in range(args["tokens"])]
    return {"tokens": tokens}


def step_fill_table(args: dict[str, Any]) -> dict[str, Any]:
    """Exactly ``total`` jobs (the create phase's are dropped first), ``bench_jobs`` of them the
    benchmark tenant's, spread over 30 days; then VACUUM ANALYZE, as autovacuum would do after
    that many inserts (and might do in the middle of the measurement otherwise)."""
    from django.db import connection
    from django.db.models import Count
    from django.utils import timezone

    from tenants.models import Tenant
    from webapp import engine_gateway
    from webapp.jobs.models import Job

    with connection.cursor() as cursor:
        cursor.execute(f'TRUNCATE "{Job._meta.db_table}" CASCADE')
    bench = Tenant.objects.get(slug="bench")
    others = list(Tenant.objects.filter(slug__startswith="bench-other-").order_by("slug"))
    owners = [bench] * args["bench_jobs"] + [others[i % len(others)] for i in range(args["total"] - args["bench_jobs"])]
    rng = random.Random(20260101)
    resolved = engine_gateway.resolve_spec(BENCH_SPEC)
    now = timezone.now()
    # The soak wants history only: a queued or running row would be admitted or reconciled by
    # its Celery worker and compete with the jobs it submits.
    mix = {k: v for k, v in STATUS_MIX.items() if k in FINISHED} if args.get("finished_only") else STATUS_MIX
    jobs = [_table_job(i, tenant, rng, now, resolved, mix) for i, tenant in enumerate(owners)]
    Job.objects.bulk_create(jobs, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute(f'VACUUM ANALYZE "{Job._meta.db_table}"')
    by_status = dict(Job.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    bench_by_status = dict(
        Job.objects.filter(tenant=bench).values_list("status").annotate(n=Count("pk")).values_list("status", "n")
    )
    return {
        "jobs": Job.objects.count(),
        "by_status": by_status,
        "bench_jobs": args["bench_jobs"],
        "bench": bench_by_status,
    }


def _table_job(
    index: int, tenant: Any, rng: random.Random, now: Any, resolved: dict[str, Any], mix: dict[str, float]
) -> Any:
    from webapp.jobs.models import Job

    status = rng.choices(list(mix), weights=list(mix.values()))[0]
    total_steps = int(resolved["trainer"]["total_steps"])
    created = now - timedelta(seconds=rng.uniform(60, 30 * 86400))
    started = None if status == "queued" else created + timedelta(seconds=rng.uniform(5, 3600))
    ended = status in ("succeeded", "failed", "cancelled")
    finished = started + timedelta(seconds=rng.uniform(60, 7200)) if started is not None and ended else None
    reasons = {"queued": "capacity: waiting for 2 free GPUs", "failed": "system: worker lost"}
    return Job(
        tenant=tenant,
        name=f"bench {status} {index}",
        status=status,
        status_reason=reasons.get(status, ""),
        failure_class="system" if status == "failed" else "",
        spec=dict(BENCH_SPEC),
        resolved_spec=resolved,
        num_gpus=int(resolved["resources"]["num_gpus"]),
        device_type="h100",
        total_steps=total_steps,
        current_step=total_steps if status == "succeeded" else (rng.randint(0, total_steps) if started else 0),
        admitted_at=started if status == "running" else None,
        attempt=1 if started else 0,
        created_at=created,
        started_at=started,
        finished_at=finished,
    )


def step_ws_jobs(args: dict[str, Any]) -> dict[str, Any]:
    """Running jobs of the benchmark tenant with no events yet, for the sockets to watch. With
    ``hold_capacity`` false (the soak, whose Celery worker runs admission and the reconciler)
    they are not admitted: they take no GPUs from submitted jobs, and the reconciler does not
    re-dispatch them to an engine that never heard of them."""
    from django.utils import timezone

    from tenants.models import Tenant
    from webapp import engine_gateway
    from webapp.jobs.models import Job

    bench = Tenant.objects.get(slug="bench")
    resolved = engine_gateway.resolve_spec(BENCH_SPEC)
    now = timezone.now()
    jobs = [
        Job(
            tenant=bench,
            name=f"bench ws {i}",
            status="running",
            status_reason="running",
            spec=dict(BENCH_SPEC),
            resolved_spec=resolved,
            num_gpus=int(resolved["resources"]["num_gpus"]),
            device_type="h100",
            total_steps=1_000_000,  # never reached: no checkpoint or finish in the middle
            admitted_at=now if args.get("hold_capacity", True) else None,
            started_at=now,
            attempt=1,
        )
        for i in range(args["jobs"])
    ]
    Job.objects.bulk_create(jobs)
    return {"job_ids": [str(job.pk) for job in jobs]}


def step_publish(args: dict[str, Any]) -> dict[str, Any]:
    """One metrics event per job per second, each job at its own offset within the second,
    through the engine-event ingest (stored, then published on commit). On schedule, each event
    is ingested alone; a publisher that fell behind (a loaded machine) ingests every event already
    due in one call, as the event pump stores all it pulled since its cursor."""
    from webapp import engine_gateway
    from webapp.jobs.services.engine_events import engine_events_ingest

    job_ids: list[str] = args["job_ids"]
    engine_id = f"bench-{uuid.uuid4().hex[:8]}"
    due = [
        (args["start_at"] + tick + i / len(job_ids), tick, job_id)
        for tick in range(int(args["duration"]))
        for i, job_id in enumerate(job_ids)
    ]
    published: Counter[str] = Counter()
    ingest_ms: list[float] = []
    behind_ms: list[float] = [0.0]
    batch_sizes: Counter[int] = Counter()
    seq = 0
    # The soak stops publishing at its end even when ingest has fallen behind (an overloaded
    # machine), so that the run ends on time; what was never sent is reported, not waited for.
    deadline = args.get("deadline")
    unsent = 0
    k = 0
    while k < len(due):
        if deadline is not None and time.time() > deadline:
            unsent = len(due) - k
            break
        wait = due[k][0] - time.time()
        if wait > 0:
            time.sleep(wait)
        else:
            behind_ms.append(-wait * 1000)
        sent_at = time.time()
        end = k + 1
        while end < len(due) and due[end][0] <= sent_at:
            end += 1
        events = []
        for _, tick, job_id in due[k:end]:
            seq += 1
            events.append(
                engine_gateway.EngineEvent(
                    seq=seq,
                    pipeline_id=job_id,
                    kind=engine_gateway.EventKind.METRICS,
                    sim_time_s=float(tick),
                    data={"step": tick + 1, "metrics": {SENT_AT: sent_at, "reward/mean": 0.5 + 0.01 * tick}},
                )
            )
            published[job_id] += 1
        engine_events_ingest(engine_id=engine_id, events=events, next_cursor=seq)
        ingest_ms.append((time.time() - sent_at) * 1000)
        batch_sizes[len(events)] += 1
        k = end
    return {
        "published": dict(published),
        "events": seq,
        "ingest": latency_summary(ingest_ms),
        "behind_schedule_max_ms": round(max(behind_ms), 1),
        "ingests_by_batch_size": dict(sorted(batch_sizes.items())),
        "unsent": unsent,
    }


def step_job_outcomes(args: dict[str, Any]) -> dict[str, Any]:
    """Where the jobs the soak submitted (by their name) stand."""
    from django.db.models import Count

    from webapp.jobs.models import Job

    rows = Job.objects.filter(name=args["name"]).values_list("status").annotate(n=Count("pk"))
    by_status = {status: n for status, n in rows}
    return {"total": sum(by_status.values()), "by_status": by_status}


DJANGO_STEPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "job_outcomes": step_job_outcomes,
    "seed": step_seed,
    "fill_table": step_fill_table,
    "ws_jobs": step_ws_jobs,
    "publish": step_publish,
}


def main(step: str, raw_args: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    print(RESULT_MARK + json.dumps(DJANGO_STEPS[step](json.loads(raw_args))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
