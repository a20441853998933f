"""The benchmark's measured loads (create, list, WebSocket fan-out) and the run that sets up
its database, Redis and servers, runs the phases asked for (or the soak) and tears down."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from devstack.bench.config import (
    PUBLISHER_START_S,
    TARGET_MS,
    WS_CLIENTS_PER_JOB,
    WS_DRAIN_S,
    Options,
    bench_env,
    progress,
)
from devstack.bench.django_steps import publish, run_step
from devstack.bench.http_load import Request, create_request, list_request, load_result, probe, run_clients
from devstack.bench.resources import Sampler, machine_info
from devstack.bench.servers import Stack
from devstack.bench.soak import phase_soak
from devstack.bench.store import drop_database, purge_redis, reset_database
from devstack.bench.ws_load import WsLog, close_sockets, listen, open_sockets, wait_delivered, ws_result
from devstack.launcher import Processes, manage


async def measure_http(stack: Stack, name: str, request: Request, expect: int) -> dict[str, Any]:
    """One HTTP load on a fresh server: a probe, the warm-up, then the measured seconds."""
    opts = stack.opts
    async with stack.serving() as server:
        first = await probe(server.base_url, stack.tokens[0], request, expect)
        progress(f"{name}: {opts.clients} clients, {opts.warmup:.0f} s warm-up + {opts.duration:.0f} s")
        meter = stack.meter(server)
        record = await run_clients(
            server.base_url, stack.tokens[: opts.clients], request, expect, opts.duration, opts.rate, opts.warmup
        )
        result = {
            **load_result(record, opts.duration, opts.clients, opts.rate),
            "content_type": first.headers.get("content-type"),
            "resources": meter.result(),
        }
    if result["errors"]:
        result["server_log"] = stack.server_logs[-1]
    progress(f"{name}: done, p99 {result['latency']['p99_ms']} ms, {result['throughput_rps']} ok/s")
    return result


async def phase_create(stack: Stack) -> dict[str, Any]:
    return await measure_http(stack, "create", create_request(), 201)


async def phase_list(stack: Stack) -> dict[str, dict[str, Any]]:
    opts = stack.opts
    bench_jobs = max(1, opts.jobs_in_table // 5)
    progress(f"list: refilling the table with {opts.jobs_in_table} jobs ({bench_jobs} of the benchmark tenant)")
    table = await asyncio.to_thread(
        run_step, stack.harness_env, "fill_table", {"total": opts.jobs_in_table, "bench_jobs": bench_jobs}
    )
    results: dict[str, dict[str, Any]] = {}
    for name, query in (("list", ""), ("list_queued", "?status=queued")):
        results[name] = {**await measure_http(stack, name, list_request(query), 200), "table": table}
    return results


async def phase_ws(stack: Stack) -> dict[str, Any]:
    opts = stack.opts
    jobs = opts.ws_clients // WS_CLIENTS_PER_JOB
    made = await asyncio.to_thread(run_step, stack.harness_env, "ws_jobs", {"jobs": jobs})
    job_ids: list[str] = made["job_ids"]
    logs = [WsLog(job_id=job_ids[i % jobs]) for i in range(opts.ws_clients)]
    async with stack.serving() as server:
        progress(f"ws: opening {opts.ws_clients} sockets on {jobs} jobs")
        open_ws = await open_sockets(server.base_url, stack.tokens, logs)
        progress(f"ws: {len(open_ws)} open; publishing 1 event/s per job for {opts.duration:.0f} s")
        listeners = [asyncio.create_task(listen(ws, log)) for ws, log in open_ws]
        try:
            meter = stack.meter(server)
            start_at = time.time() + PUBLISHER_START_S
            published = await publish(stack.env, job_ids, opts.duration, start_at)
            drained_s = await wait_delivered([log for _, log in open_ws], published["published"], WS_DRAIN_S)
            result = ws_result(logs, published, start_at, drained_s, opts.ws_clients, opts.duration)
            result["resources"] = meter.result()
        finally:
            await close_sockets(open_ws, listeners)
            closed_early = {log.job_id for _, log in open_ws if log.error}
    if closed_early or result["delivery"]["missing"]:
        result["server_log"] = stack.server_logs[-1]
    progress(f"ws: done, lag p99 {result['lag']['p99_ms']} ms, missing {result['delivery']['missing']}")
    return result


async def run_benchmark(opts: Options) -> dict[str, Any]:
    admin_url = opts.admin_url
    report: dict[str, Any] = {
        "machine": machine_info(opts.workers),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items()},
        "targets_ms": TARGET_MS,
        "server": {"command": f"uvicorn webapp.asgi:application --workers {opts.workers}", **server_stack_info()},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "phases": {},
    }
    progress(f"setup: database {opts.database}, migrations, tenants and {opts.clients} tokens")
    reset_database(admin_url, opts.database, opts.db_connection_limit)
    purge_redis(opts.redis_url, opts.prefix)
    sampler = Sampler(admin_url, opts.database)
    sampler.start()
    env = bench_env(opts)
    try:
        await asyncio.to_thread(manage, env, "migrate", "--noinput", "-v", "0")
        seeded = await asyncio.to_thread(run_step, env, "seed", {"tokens": opts.clients})
        with tempfile.TemporaryDirectory(prefix="bench-cp-") as log_dir:
            stack = Stack(
                opts=opts,
                env=env,
                harness_env={**env, "DATABASE_URL": f"{opts.pg_url}/{opts.database}"},
                tokens=seeded["tokens"],
                sampler=sampler,
                processes=Processes(env, Path(log_dir)),
            )
            run_started = time.monotonic()
            if opts.soak:
                report["soak"] = await phase_soak(stack)
            else:
                if "create" in opts.only:
                    report["phases"]["create"] = await phase_create(stack)
                if "list" in opts.only:
                    report["phases"].update(await phase_list(stack))
                if "ws" in opts.only:
                    report["phases"]["ws"] = await phase_ws(stack)
            report["during_run"] = sampler.between(run_started, time.monotonic())
    finally:
        progress("teardown: Redis keys" + ("" if opts.keep_db else f", database {opts.database}"))
        sampler.stopped.set()
        sampler.join(timeout=5)
        report["redis_purge"] = purge_redis(opts.redis_url, opts.prefix)
        if not opts.keep_db:
            drop_database(admin_url, opts.database)
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return report


def server_stack_info() -> dict[str, Any]:
    """What uvicorn picks with its defaults here ("auto": uvloop and httptools when present)."""
    present = {}
    for module in ("uvloop", "httptools"):
        try:
            __import__(module)
            present[module] = True
        except ImportError:
            present[module] = False
    return {
        "loop": "uvloop" if present["uvloop"] else "asyncio",
        "http": "httptools" if present["httptools"] else "h11",
    }
