"""HTTP load: clients on keep-alive connections, back to back or on a fixed schedule, each
request timed from when it was due (a server that falls behind is charged for the wait)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from devstack.bench.config import BENCH_SPEC, WARMUP_S, WINDOW_S, BenchError
from devstack.bench.stats import latency_summary, windowed_p99

Request = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


@dataclass
class LoadRecord:
    samples: list[tuple[float, float]] = field(default_factory=list)  # (s since measuring began, ms)
    errors: Counter[str] = field(default_factory=Counter)
    error_times: list[float] = field(default_factory=list)  # s since measuring began
    response_bytes: int = 0


async def run_clients(
    base_url: str,
    tokens: Sequence[str],
    request: Request,
    expect: int,
    duration_s: float,
    rate: float,
    warmup_s: float = WARMUP_S,
) -> LoadRecord:
    """One keep-alive connection per client; a warm-up, then ``duration_s`` measured. With
    ``rate`` each client sends on a fixed schedule and latency counts from the scheduled time."""
    loop = asyncio.get_running_loop()
    begin = loop.time()
    measure_from = begin + warmup_s
    end = measure_from + duration_s
    record = LoadRecord()

    async def client(index: int) -> None:
        interval = 1.0 / rate if rate > 0 else 0.0
        due = begin + (index / len(tokens)) * interval  # spread paced clients over one interval
        async with httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {tokens[index]}"},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=30.0,
        ) as http:
            while True:
                if interval:
                    if due >= end:
                        return  # not sleeping till a send that would not happen (slow rates)
                    await asyncio.sleep(max(0.0, due - loop.time()))
                    sent_at, due = due, due + interval
                else:
                    sent_at = loop.time()
                if sent_at >= end:
                    return
                outcome, size = await _one_request(http, request, expect)
                if sent_at >= measure_from:
                    record.samples.append((sent_at - measure_from, (loop.time() - sent_at) * 1000))
                    record.response_bytes += size
                    if outcome:
                        record.errors[outcome] += 1
                        record.error_times.append(sent_at - measure_from)

    await asyncio.gather(*(client(i) for i in range(len(tokens))))
    return record


async def _one_request(http: httpx.AsyncClient, request: Request, expect: int) -> tuple[str, int]:
    """Send one request: ('' when it got the expected status, else what went wrong; body bytes)."""
    try:
        response = await request(http)
    except httpx.HTTPError as exc:
        return type(exc).__name__, 0
    outcome = "" if response.status_code == expect else f"HTTP {response.status_code}"
    return outcome, len(response.content)


def load_result(record: LoadRecord, duration_s: float, clients: int, rate: float) -> dict[str, Any]:
    errors = sum(record.errors.values())
    return {
        "clients": clients,
        "rate_per_client": rate or "back to back",
        "duration_s": duration_s,
        "requests": len(record.samples),
        "errors": errors,
        "errors_by_kind": dict(record.errors),
        "throughput_rps": round((len(record.samples) - errors) / duration_s, 1),
        "mean_response_bytes": round(record.response_bytes / max(1, len(record.samples))),
        "latency": latency_summary([ms for _, ms in record.samples]),  # failed requests included
        "p99_by_window": windowed_p99(record.samples, duration_s, WINDOW_S),
    }


async def probe(base_url: str, token: str, request: Request, expect: int) -> httpx.Response:
    """One untimed request first: a wrong setup fails here with the server's answer."""
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        response = await request(http)
    if response.status_code != expect:
        raise BenchError(f"probe: expected HTTP {expect}, got {response.status_code}: {response.text[:1000]}")
    return response


def create_request() -> Request:
    body = json.dumps({"name": "bench", "spec": BENCH_SPEC}).encode()

    async def submit(http: httpx.AsyncClient) -> httpx.Response:
        headers = {"Idempotency-Key": str(uuid.uuid4()), "Content-Type": "application/json"}
        return await http.post("/api/v1/jobs", content=body, headers=headers)

    return submit


def list_request(query: str) -> Request:
    async def fetch(http: httpx.AsyncClient) -> httpx.Response:
        return await http.get(f"/api/v1/jobs{query}")

    return fetch
