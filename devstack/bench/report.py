"""The benchmark's summary: one verdict per target (measured p99 against it), the details of
each phase, and the soak's table and verdict."""

from __future__ import annotations

from typing import Any

from devstack.bench import stats
from devstack.bench.config import TARGET_MS, WINDOW_S


def verdicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: measured p99, target, target / measured, pass or fail."""
    rows = []
    labels = {
        "create": "job create p99",
        "list": "job list p99 (first page)",
        "list_queued": "job list p99 (?status=queued)",
    }
    for name, label in labels.items():
        phase = report["phases"].get(name)
        if phase:
            rows.append(_verdict(label, phase["latency"]["p99_ms"], TARGET_MS[name], phase["errors"]))
    ws = report["phases"].get("ws")
    if ws:
        faults = ws["delivery"]["missing"] + ws["delivery"]["duplicates"] + ws["clients"] - ws["connected"]
        rows.append(_verdict("ws delivery lag p99", ws["lag"]["p99_ms"], TARGET_MS["ws"], faults))
    return rows


def _verdict(label: str, measured: float | None, target: float, faults: int) -> dict[str, Any]:
    ratio = target / measured if measured else None
    ok = measured is not None and measured <= target and faults == 0
    return {"metric": label, "measured_ms": measured, "target_ms": target, "ratio": ratio, "faults": faults, "pass": ok}


def summary_text(report: dict[str, Any]) -> str:
    machine, phases, during = report["machine"], report["phases"], report.get("during_run", {})
    lines = [
        "",
        f"Control-plane benchmark: {machine['cpu_count']} cores (nproc {machine['nproc']}), "
        f"{machine['server_workers']} uvicorn workers ({report['server']['loop']}, {report['server']['http']}), "
        f"Python {machine['python']}",
        f"load average before {report['loadavg_before']}, after {report['loadavg_after']}; during the run "
        f"(1 min) mean {during.get('load1_mean')}, max {during.get('load1_max')}",
        "",
        f"{'metric':<32}{'measured':>12}{'target':>10}{'ratio':>8}{'faults':>8}  result",
    ]
    for row in verdicts(report):
        measured = f"{row['measured_ms']:.1f} ms" if row["measured_ms"] is not None else "-"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
        result = "PASS" if row["pass"] else "FAIL"
        lines.append(
            f"{row['metric']:<32}{measured:>12}{row['target_ms']:>7.0f} ms{ratio:>8}{row['faults']:>8}  {result}"
        )
    lines.append("ratio = target / measured (>= 1 meets it); faults = errors, or missing + duplicate + unconnected")
    for name in ("create", "list", "list_queued"):
        if name in phases:
            lines.extend(_http_detail(name, phases[name]))
    if "ws" in phases:
        lines.extend(_ws_detail(phases["ws"]))
    return "\n".join(lines)


def _resources_line(resources: dict[str, Any]) -> str:
    return (
        f"  cores busy {resources['cores_busy_all_processes']} (server {resources['cores_server']}, "
        f"load generator {resources['cores_load_generator']}, other incl. Postgres {resources['cores_other']}); "
        f"load1 max {resources.get('load1_max')}; new DB sessions {resources['db_sessions_opened']}, "
        f"DB connections max {resources.get('db_connections_max')}"
    )


def _pace(rate: float | str) -> str:
    return rate if isinstance(rate, str) else f"{rate:g} requests/s each"


def _http_detail(name: str, phase: dict[str, Any]) -> list[str]:
    lat = phase["latency"]
    windows = " ".join(f"{w['p99_ms']}" for w in phase["p99_by_window"])
    return [
        "",
        f"{name}: {phase['clients']} clients ({_pace(phase['rate_per_client'])}), {phase['requests']} requests, "
        f"{phase['throughput_rps']} ok/s, {phase['errors']} errors "
        f"{phase['errors_by_kind'] or ''}, {phase['mean_response_bytes']} B/response",
        f"  latency ms: p50 {lat['p50_ms']}  p95 {lat['p95_ms']}  p99 {lat['p99_ms']}  max {lat['max_ms']}  "
        f"mean {lat['mean_ms']}",
        f"  p99 per {WINDOW_S:.0f} s window: {windows}",
        _resources_line(phase["resources"]),
    ]


def _ws_detail(ws: dict[str, Any]) -> list[str]:
    lat, connect, pub = ws["lag"], ws["connect"], ws["publisher"]
    windows = " ".join(f"{w['p99_ms']}" for w in ws["p99_by_window"])
    return [
        "",
        f"ws: {ws['connected']}/{ws['clients']} connected on {ws['jobs']} jobs (connect p50 {connect['p50_ms']} "
        f"p99 {connect['p99_ms']} ms; errors {ws['client_errors'] or 'none'})",
        f"  messages: {ws['messages_received']} received of {ws['messages_expected']} expected; "
        f"missing {ws['delivery']['missing']}, duplicates {ws['delivery']['duplicates']}, "
        f"unexpected {ws['delivery']['unexpected']}; other frames {ws['other_frames'] or 'none'}",
        f"  delivery lag ms: p50 {lat['p50_ms']}  p95 {lat['p95_ms']}  p99 {lat['p99_ms']}  max {lat['max_ms']}",
        f"  p99 per {WINDOW_S:.0f} s window: {windows}",
        f"  publisher: {pub['events']} events; ingest+publish ms p50 {pub['ingest']['p50_ms']} "
        f"p99 {pub['ingest']['p99_ms']}; behind schedule max {pub['behind_schedule_max_ms']} ms; "
        f"ingest calls by events in them {pub['ingests_by_batch_size']}",
        _resources_line(ws["resources"]),
    ]


def soak_summary_text(report: dict[str, Any]) -> str:
    soak, machine = report["soak"], report["machine"]
    memory, verdict = soak["memory"], soak["verdict"]
    lines = [
        "",
        f"Control-plane soak: {soak['duration_s']:g} s after {soak['warmup_s']:g} s warm-up, windows of "
        f"{soak['window_s']:g} s; {machine['cpu_count']} cores, {machine['server_workers']} uvicorn workers, "
        "1 Celery worker (pool of 1, beat embedded), local simulated engine",
        f"load: create {soak['load']['create']}, list {soak['load']['list']}; ws {soak['load']['ws']}; "
        f"the table started with {soak['table']['jobs']} finished jobs",
        "",
        stats.table_text(soak["windows"]),
        "latency ms (c = create, l = list; sent in the window); ws p99 = delivery lag; MiB = RSS at the window's end",
        "",
    ]
    for name in ("create", "list"):
        lat = soak[name]["latency"]
        lines.append(
            f"{name}: {soak[name]['requests']} requests, {soak[name]['throughput_rps']} ok/s, "
            f"{soak[name]['errors']} errors {soak[name]['errors_by_kind'] or ''}; "
            f"p50 {lat['p50_ms']}  p95 {lat['p95_ms']}  p99 {lat['p99_ms']}  max {lat['max_ms']} ms"
        )
    ws = soak["ws"]
    lines.append(
        f"ws: {ws['connected']}/{ws['clients']} connected, {ws['dropped']} dropped; {ws['events_published']} events "
        f"published; missing {ws['delivery']['missing']}, duplicates {ws['delivery']['duplicates']}; "
        f"lag p50 {ws['lag']['p50_ms']}  p99 {ws['lag']['p99_ms']}  max {ws['lag']['max_ms']} ms"
    )
    pub = ws["publisher"]
    lines.append(
        f"  publisher: behind schedule max {pub['behind_schedule_max_ms']} ms; ingest calls by events in them "
        f"{pub['ingests_by_batch_size']}; {pub['unsent']} never sent"
    )
    jobs = soak["jobs_submitted"]
    lines.append(f"submitted jobs at the end: {jobs['total']} ({jobs['by_status']})")
    lines.append(
        f"cores busy {soak['resources']['cores_busy_all_processes']} (server {soak['resources']['cores_server']}, "
        f"load generator {soak['resources']['cores_load_generator']}, other incl. Celery and Postgres "
        f"{soak['resources']['cores_other']})"
    )
    lines.append("")
    lines.append(
        f"memory (RSS slope from half the run, or from when a bounded history has filled; flat = |slope| <= "
        f"{memory['tolerance_mib_per_min']:g} MiB/min):"
    )
    for name, group in memory["groups"].items():
        judged = (
            f"from {group['from_s']:g} s {group['judged_growth_mib']:+} MiB, "
            f"slope {group['judged_slope_mib_per_min']:+} MiB/min: {'flat' if group['flat'] else 'NOT FLAT'}"
            if group["too_short"] is None
            else f"not judged: {group['too_short']}"
        )
        lines.append(
            f"  {name:<7} start {group['start_mib']} MiB, end {group['end_mib']} MiB, peak {group['peak_mib']} MiB; "
            + judged
        )
    kinds = ", ".join(f"{k} {v}" for k, v in verdict["by_kind"].items() if v) or "none"
    lines.append("")
    lines.append(
        f"verdict: {'PASS' if verdict['pass'] else 'FAIL'}: {verdict['errors']} errors ({kinds}); "
        f"memory {'flat' if verdict['memory_flat'] else 'NOT flat'}"
    )
    for name, found in soak["log_errors"].items():
        for line in found[:5]:
            lines.append(f"  {name} log: {line[:200]}")
    return "\n".join(lines)
