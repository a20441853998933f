"""WebSocket fan-out: sockets on jobs' event streams, what each received, and delivery
against what was published (every event exactly once, and its lag)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from devstack.bench.config import SENT_AT, WINDOW_S, WS_CONNECTS_AT_ONCE, WS_PATH
from devstack.bench.stats import latency_summary, windowed_p99


@dataclass
class WsLog:
    """What one socket received."""

    job_id: str
    seqs: Counter[int] = field(default_factory=Counter)
    lags: list[tuple[float, float]] = field(default_factory=list)  # (receive wall time, lag ms)
    other_frames: Counter[str] = field(default_factory=Counter)
    connect_ms: float | None = None
    error: str | None = None
    error_at: float | None = None  # wall time of a drop after connecting

    def take(self, frame: dict[str, Any], received_at: float) -> None:
        if frame.get("type") == "events":  # v1: batches
            events = list(frame.get("events") or [])
        elif frame.get("type") == "event":  # the dashboard's path: one per frame
            events = [frame["event"]]
        else:
            self.other_frames[str(frame.get("type"))] += 1
            return
        for event in events:
            self.seqs[int(event["seq"])] += 1
            sent_at = (event.get("data") or {}).get("metrics", {}).get(SENT_AT)
            if sent_at is not None:
                self.lags.append((received_at, (received_at - float(sent_at)) * 1000))


async def open_socket(base_url: str, token: str, log: WsLog, gate: asyncio.Semaphore) -> ClientConnection | None:
    """Connect and wait for the first frame (the stream is live from then on)."""
    url = base_url.replace("http://", "ws://") + WS_PATH.format(job_id=log.job_id)
    async with gate:
        started = time.perf_counter()
        try:
            ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=60)
            first = await asyncio.wait_for(ws.recv(), timeout=60)
        except Exception as exc:  # any failure is a finding, not a crash
            log.error = f"{type(exc).__name__}: {exc}"[:200]
            return None
        log.connect_ms = (time.perf_counter() - started) * 1000
        log.take(json.loads(first), time.time())
        return ws


async def listen(ws: ClientConnection, log: WsLog) -> None:
    try:
        async for raw in ws:
            log.take(json.loads(raw), time.time())
    except Exception as exc:  # a dropped socket is reported, not raised
        log.error = f"{type(exc).__name__}: {exc}"[:200]
        log.error_at = time.time()


def delivery_counts(logs: Sequence[WsLog], published: dict[str, int]) -> dict[str, int]:
    """Against what was published: events never received, received twice, or unknown."""
    missing = duplicates = unexpected = 0
    for log in logs:
        expected = published.get(log.job_id, 0)
        got = set(log.seqs)
        missing += sum(1 for seq in range(1, expected + 1) if seq not in got)
        duplicates += sum(n - 1 for n in log.seqs.values() if n > 1)
        unexpected += sum(1 for seq in got if seq > expected)
    return {"missing": missing, "duplicates": duplicates, "unexpected": unexpected}


async def wait_delivered(logs: Sequence[WsLog], published: dict[str, int], limit_s: float) -> float:
    """Wait until every open socket has its job's events (or ``limit_s``); seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if all(len(log.seqs) >= published.get(log.job_id, 0) for log in logs if log.error is None):
            break
        await asyncio.sleep(0.2)
    return time.monotonic() - started


def ws_result(
    logs: Sequence[WsLog], published: dict[str, Any], start_at: float, drained_s: float, clients: int, duration_s: float
) -> dict[str, Any]:
    connected = [log for log in logs if log.connect_ms is not None]
    lag_samples = [(at - start_at, ms) for log in logs for at, ms in log.lags]
    expected = sum(published["published"].get(log.job_id, 0) for log in connected)
    failures = Counter(log.error.split(":")[0] for log in logs if log.error)
    return {
        "clients": clients,
        "jobs": len(published["published"]),
        "connected": len(connected),
        "connect": latency_summary([log.connect_ms for log in connected if log.connect_ms is not None]),
        "client_errors": dict(failures),
        "client_error_examples": sorted({log.error for log in logs if log.error})[:5],
        "events_published": published["events"],
        "messages_expected": expected,
        "messages_received": sum(sum(log.seqs.values()) for log in connected),
        "delivery": delivery_counts(connected, published["published"]),
        "other_frames": dict(sum((log.other_frames for log in logs), Counter())),
        "drain_wait_s": round(drained_s, 1),
        "lag": latency_summary([ms for _, ms in lag_samples]),
        "p99_by_window": windowed_p99(lag_samples, duration_s + 2, WINDOW_S),
        "publisher": {k: v for k, v in published.items() if k != "published"},
    }


async def open_sockets(
    base_url: str, tokens: Sequence[str], logs: Sequence[WsLog]
) -> list[tuple[ClientConnection, WsLog]]:
    """A socket per log, a few connecting at once, the tokens taken in turn; those that opened."""
    gate = asyncio.Semaphore(WS_CONNECTS_AT_ONCE)
    sockets = await asyncio.gather(
        *(open_socket(base_url, tokens[i % len(tokens)], log, gate) for i, log in enumerate(logs))
    )
    return [(ws, log) for ws, log in zip(sockets, logs, strict=True) if ws is not None]


async def close_sockets(
    open_ws: Sequence[tuple[ClientConnection, WsLog]], listeners: Sequence[asyncio.Task[None]]
) -> None:
    await asyncio.gather(*(ws.close() for ws, _ in open_ws), return_exceptions=True)
    for task in listeners:
        task.cancel()
    await asyncio.gather(*listeners, return_exceptions=True)
