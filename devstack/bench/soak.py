"""The soak: create, list and WebSocket load at once for minutes, with a Celery worker running
the submitted jobs; latency, errors and memory per window, and a verdict."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devstack.bench import stats
from devstack.bench.config import SOAK_ENGINE_SPEED, WS_CLIENTS_PER_JOB, WS_DRAIN_S, Options, progress
from devstack.bench.django_steps import publish, run_step
from devstack.bench.http_load import LoadRecord, create_request, list_request, load_result, probe, run_clients
from devstack.bench.resources import SoakMeter
from devstack.bench.servers import WORKER, Stack
from devstack.bench.ws_load import WsLog, close_sockets, delivery_counts, listen, open_sockets, wait_delivered
from devstack.launcher import log_tail

LOG_ERROR_MARKS = (" ERROR", " CRITICAL", "ERROR/", "CRITICAL/")


def engine_history_fills_s() -> float:
    """Wall seconds after which the worker's simulated engine holds as much past as it ever will:
    it keeps an hour of engine time (``LocalEngine``'s retention; 3 minutes of wall time at speed
    20) and prunes a sixteenth of that late at most. Its memory grows until then by design."""
    from jigsaw_engine.control.cluster_controller import PRUNES_PER_RETENTION
    from jigsaw_engine.control.local_engine import retention_s

    kept = retention_s(SOAK_ENGINE_SPEED)
    assert kept is not None, "the simulated engine keeps a bounded history"
    return kept / SOAK_ENGINE_SPEED * (1 + 1 / PRUNES_PER_RETENTION)


def log_errors(path: Path) -> list[str]:
    """What a process log reports as errors: ERROR/CRITICAL lines, and for each traceback its
    exception (the first unindented line after it)."""
    if not path.exists():
        return []
    found, in_traceback = [], False
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and line and not line.startswith((" ", "\t")):
            found.append(f"exception: {line}")
            in_traceback = False
        elif any(mark in line for mark in LOG_ERROR_MARKS):
            found.append(line)
    return found


async def phase_soak(stack: Stack) -> dict[str, Any]:
    """Create, list and WebSocket load at once, with a Celery worker admitting, dispatching and
    pumping the submitted jobs through the local (simulated) engine; latency, errors and memory
    every ``--window`` seconds."""
    opts = stack.opts
    progress(f"soak: the table gets {opts.jobs_in_table} finished jobs (history for the list)")
    table = await asyncio.to_thread(
        run_step,
        stack.harness_env,
        "fill_table",
        {"total": opts.jobs_in_table, "bench_jobs": max(1, opts.jobs_in_table // 5), "finished_only": True},
    )
    jobs = opts.ws_clients // WS_CLIENTS_PER_JOB
    made = await asyncio.to_thread(run_step, stack.harness_env, "ws_jobs", {"jobs": jobs, "hold_capacity": False})
    job_ids: list[str] = made["job_ids"]
    logs = [WsLog(job_id=job_ids[i % jobs]) for i in range(opts.ws_clients)]
    worker_pid = stack.start_worker()
    worker_log = stack.processes.log(WORKER)
    try:
        async with stack.serving() as server:
            await stack.wait_worker_ready()
            await probe(server.base_url, stack.tokens[0], create_request(), 201)
            progress(f"soak: opening {opts.ws_clients} sockets on {jobs} jobs")
            open_ws = await open_sockets(server.base_url, stack.tokens, logs)
            listeners = [asyncio.create_task(listen(ws, log)) for ws, log in open_ws]
            meter = SoakMeter({"server": server.pid, "worker": worker_pid}, opts.redis_url, opts.prefix)
            try:
                progress(
                    f"soak: {opts.warmup:.0f} s warm-up + {opts.soak:.0f} s: {opts.clients} clients x "
                    f"{opts.rate:g} creates/s, {opts.list_clients} x {opts.list_rate:g} lists/s, "
                    f"{len(open_ws)} sockets on 1 Hz metrics"
                )
                resources = stack.meter(server)
                start_wall = time.time()
                meter.start()
                tokens = stack.tokens
                create, listing, published = await asyncio.gather(
                    run_clients(server.base_url, tokens, create_request(), 201, opts.soak, opts.rate, opts.warmup),
                    run_clients(
                        server.base_url,
                        tokens[: opts.list_clients],
                        list_request(""),
                        200,
                        opts.soak,
                        opts.list_rate,
                        opts.warmup,
                    ),
                    publish(
                        stack.env, job_ids, opts.warmup + opts.soak, start_wall, start_wall + opts.warmup + opts.soak
                    ),
                )
                meter.stopped.set()
                drained_s = await wait_delivered([log for _, log in open_ws], published["published"], WS_DRAIN_S)
                usage = resources.result()
                alive = {"server": stack.processes.alive(server.name), "worker": stack.processes.alive(WORKER)}
                server_errors = log_errors(server.log_path)
            finally:
                meter.stopped.set()
                meter.join(timeout=10)
                await close_sockets(open_ws, listeners)
    finally:
        stack.stop_worker()
    outcomes = await asyncio.to_thread(run_step, stack.harness_env, "job_outcomes", {"name": "bench"})
    measure_from = start_wall + opts.warmup
    result = soak_result(
        opts,
        create=create,
        listing=listing,
        logs=logs,
        published=published,
        measure_from=measure_from,
        meter=meter,
    )
    result.update(
        table=table,
        drain_wait_s=round(drained_s, 1),
        resources=usage,
        processes_alive=alive,
        log_errors={"server": server_errors[:20], "worker": log_errors(worker_log)[:20]},
        jobs_submitted=outcomes,
    )
    result["verdict"] = soak_verdict(result)
    if result["verdict"]["errors"]:
        result["server_log"] = stack.server_logs[-1]
        result["worker_log"] = log_tail(worker_log, 6000)
    progress(
        f"soak: done, {result['verdict']['errors']} errors, memory {'flat' if result['memory']['flat'] else 'NOT flat'}"
    )
    return result


def soak_result(
    opts: Options,
    *,
    create: LoadRecord,
    listing: LoadRecord,
    logs: Sequence[WsLog],
    published: dict[str, Any],
    measure_from: float,
    meter: SoakMeter,
) -> dict[str, Any]:
    duration, window = opts.soak, opts.window
    connected = [log for log in logs if log.connect_ms is not None]
    lag_samples = [(at - measure_from, ms) for log in connected for at, ms in log.lags]
    drops = [log.error_at - measure_from for log in connected if log.error_at is not None]
    missing_at = [
        (seq - 1) - opts.warmup  # the job's event seq k was published at tick k-1
        for log in connected
        for seq in range(1, published["published"].get(log.job_id, 0) + 1)
        if seq not in log.seqs
    ]
    creates = stats.latency_windows(create.samples, create.error_times, duration, window)
    lists = stats.latency_windows(listing.samples, listing.error_times, duration, window)
    ws = stats.latency_windows(lag_samples, [*drops, *missing_at], duration, window)
    rss = {name: [(t - measure_from, float(v)) for t, v in samples] for name, samples in meter.rss.items()}
    rss_at = {name: stats.value_windows(samples, duration, window) for name, samples in rss.items()}
    backlog = stats.value_windows([(t - measure_from, float(n)) for t, n in meter.backlog], duration, window)
    rows = []
    for i, (c, li, w) in enumerate(zip(creates, lists, ws, strict=True)):
        rows.append(
            {
                "from_s": c["from_s"],
                "create_n": c["n"],
                **{f"create_p{q}_ms": c[f"p{q}_ms"] for q in (50, 95, 99)},
                "list_n": li["n"],
                **{f"list_p{q}_ms": li[f"p{q}_ms"] for q in (50, 95, 99)},
                "errors": c["errors"] + li["errors"] + w["errors"],
                "ws_events": w["n"],
                "ws_p99_ms": w["p99_ms"],
                "rss_server_mib": _mib(rss_at["server"][i]),
                "rss_worker_mib": _mib(rss_at["worker"][i]),
                "celery_backlog": None if (queued := backlog[i]) is None else int(queued),
            }
        )
    return {
        "duration_s": duration,
        "window_s": window,
        "warmup_s": opts.warmup,
        "load": {
            "create": f"{opts.clients} clients x {opts.rate:g}/s",
            "list": f"{opts.list_clients} clients x {opts.list_rate:g}/s",
            "ws": f"{opts.ws_clients} sockets on {len(published['published'])} jobs, 1 event/s per job",
        },
        "windows": rows,
        "create": load_result(create, duration, opts.clients, opts.rate),
        "list": load_result(listing, duration, opts.list_clients, opts.list_rate),
        "ws": {
            "clients": len(logs),
            "connected": len(connected),
            "dropped": len(drops),
            "client_errors": sorted({log.error for log in logs if log.error})[:5],
            "events_published": published["events"],
            "delivery": delivery_counts(connected, published["published"]),
            "lag": stats.latency_summary([ms for t, ms in lag_samples if 0 <= t <= duration]),
            "publisher": {k: v for k, v in published.items() if k != "published"},
        },
        "memory": stats.memory_verdict(rss, duration, opts.rss_tolerance, {"worker": engine_history_fills_s()}),
        "processes": meter.processes(),
    }


def _mib(value: float | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)


def soak_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """Every error counted once; the soak passes with none and flat memory."""
    ws = result["ws"]
    counts = {
        "create": result["create"]["errors"],
        "list": result["list"]["errors"],
        "ws_unconnected": ws["clients"] - ws["connected"],
        "ws_dropped": ws["dropped"],
        "ws_missing": ws["delivery"]["missing"],
        "ws_duplicates": ws["delivery"]["duplicates"],
        "ws_events_unsent": ws["publisher"].get("unsent", 0),  # ingest could not keep 1 Hz
        "log_errors": sum(len(lines) for lines in result["log_errors"].values()),
        "jobs_failed": result["jobs_submitted"].get("by_status", {}).get("failed", 0),
        "processes_exited": sum(1 for alive in result["processes_alive"].values() if not alive),
    }
    errors = sum(counts.values())
    return {
        "errors": errors,
        "by_kind": counts,
        "memory_flat": result["memory"]["flat"],
        "pass": errors == 0 and result["memory"]["flat"],
    }
