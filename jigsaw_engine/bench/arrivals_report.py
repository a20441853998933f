"""What a day of arrivals measured under one policy, and every policy side by side.

- goodput: tokens trained by the end of the day over the day's length;
- completion time (arrival to end) and queueing delay (arrival to first admission): mean, p95;
- utilisation: device-time busy within the day over the cluster's device-time in the day;
- fairness: each tenant's GPU-seconds held in the day against its entitlement, the weighted
  max-min fair split of what was handed out given what each tenant asked for (a tenant that
  asked for less than its weight's share is entitled to what it asked); Jain's index over
  received / entitled (1 is perfectly fair);
- missed estimates: jobs whose run (admission to end) took more than 1.25x their run alone,
  as verl would run them on the GPUs they asked for (the estimate a user is given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jigsaw_engine.bench.arrivals_file import ArrivalsFile
from jigsaw_engine.bench.service_sim import ARRIVAL_POLICIES, ServiceRun, alone_estimates, run_service_day
from jigsaw_engine.bench.simulate import POLICIES

MISSED_ESTIMATE_FACTOR = 1.25


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 100]); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one takes everything."""
    if not values or not any(values):
        return math.nan
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def weighted_fair_split(total: float, demands: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """Weighted max-min fair shares of ``total``: no tenant gets more than it asked for, and the
    rest is split in proportion to weight (water-filling)."""
    share = dict.fromkeys(demands, 0.0)
    open_ = {t for t, d in demands.items() if d > 0}
    left = total
    while open_ and left > 1e-9:
        level = left / sum(weights[t] for t in open_)
        capped = {t for t in open_ if demands[t] - share[t] <= level * weights[t]}
        if not capped:
            for t in open_:
                share[t] += level * weights[t]
            break
        for t in capped:
            left -= demands[t] - share[t]
            share[t] = demands[t]
        open_ -= capped
    return share


def service_figures(run: ServiceRun, arrivals: ArrivalsFile, estimates: Mapping[str, float]) -> dict[str, Any]:
    day_s = arrivals.day_s
    num_devices = arrivals.cluster.num_devices
    jobs = list(run.jobs.values())
    done = [j for j in jobs if j.ended_s is not None]
    jct = [j.ended_s - j.arrival.arrival_s for j in done if j.ended_s is not None]
    waits = [j.admitted_s - j.arrival.arrival_s for j in jobs if j.admitted_s is not None]
    busy = 0.0
    for span in run.controller.timeline:
        overlap = min(span.end_s, day_s) - span.start_s
        if overlap > 0:
            busy += overlap * len(span.devices) * span.share
    missed = [
        j.arrival.job_id
        for j in done
        if j.ended_s is not None
        and j.admitted_s is not None
        and j.ended_s - j.admitted_s > MISSED_ESTIMATE_FACTOR * estimates[j.arrival.job_id]
    ]
    return {
        "goodput_tokens_per_s": run.tokens_in_day / day_s,
        "jobs": len(jobs),
        "jobs_finished": len(done),
        "jct_s": {"mean": _mean(jct), "p95": percentile(jct, 95)},
        "queueing_delay_s": {"mean": _mean(waits), "p95": percentile(waits, 95)},
        "utilisation": busy / (num_devices * day_s),
        "reclaims": sum(j.reclaims for j in jobs),
        "missed_estimate": {"count": len(missed), "jobs": missed},
        "tenants": _tenant_shares(run, arrivals, estimates),
    }


def _tenant_shares(run: ServiceRun, arrivals: ArrivalsFile, estimates: Mapping[str, float]) -> dict[str, Any]:
    weights = {t.name: t.weight for t in arrivals.tenants}
    received = dict.fromkeys(weights, 0.0)
    demand = dict.fromkeys(weights, 0.0)
    for j in run.jobs.values():
        received[j.arrival.tenant] += j.held_gpu_s
        remaining_day = arrivals.day_s - j.arrival.arrival_s
        asked = j.arrival.spec.resources.num_gpus * min(estimates[j.arrival.job_id], remaining_day)
        demand[j.arrival.tenant] += asked
    entitled = weighted_fair_split(sum(received.values()), demand, weights)
    ratios = {t: received[t] / entitled[t] for t in weights if entitled[t] > 0}
    total = sum(received.values()) or 1.0
    by_tenant = {
        t: {
            "weight_share": weights[t] / sum(weights.values()),
            "share": received[t] / total,
            "gpu_s": received[t],
            "demand_gpu_s": demand[t],
            "entitled_gpu_s": entitled[t],
        }
        for t in weights
    }
    return {"by_tenant": by_tenant, "jain_index": jain_index(list(ratios.values()))}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def arrivals_table(result: Mapping[str, Any]) -> list[str]:
    """The table ``jigsaw simulate --arrivals`` prints: a row per policy."""
    lines = [
        f"{'policy':16s} {'goodput tok/s':>13s} {'JCT mean':>9s} {'JCT p95':>8s} {'wait mean':>9s} "
        f"{'wait p95':>8s} {'util':>6s} {'Jain':>5s} {'missed':>6s} {'done':>7s}"
    ]
    for name, r in result["policies"].items():
        lines.append(
            f"{name:16s} {r['goodput_tokens_per_s']:13.0f} {r['jct_s']['mean']:9.0f} {r['jct_s']['p95']:8.0f} "
            f"{r['queueing_delay_s']['mean']:9.0f} {r['queueing_delay_s']['p95']:8.0f} {r['utilisation']:6.1%} "
            f"{r['tenants']['jain_index']:5.2f} {r['missed_estimate']['count']:6d} "
            f"{r['jobs_finished']:3d}/{r['jobs']:<3d}"
        )
    return lines


def simulate_arrivals(
    arrivals: ArrivalsFile,
    policies: Sequence[str],
    *,
    progress: Callable[[int, int, str], None] = lambda done, total, name: None,
) -> tuple[dict[str, Any], dict[str, ServiceRun]]:
    """Every policy under the same arrivals and admission: the figures (JSON-ready) and the runs."""
    unknown = [p for p in policies if p not in ARRIVAL_POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown} for arrivals; available: {', '.join(ARRIVAL_POLICIES)}")
    progress(0, len(policies) + 1, "estimates")
    estimates = alone_estimates(arrivals)
    runs: dict[str, ServiceRun] = {}
    figures: dict[str, Any] = {}
    for i, name in enumerate(policies):
        progress(i + 1, len(policies) + 1, name)
        runs[name] = run_service_day(arrivals, POLICIES[name])
        figures[name] = service_figures(runs[name], arrivals, estimates)
    progress(len(policies) + 1, len(policies) + 1, "done")
    cluster = arrivals.cluster
    result = {
        "cluster": {"num_devices": cluster.num_devices, "device_type": cluster.device_type},
        "day_s": arrivals.day_s,
        "jobs": len(arrivals.jobs),
        "steps": sum(a.spec.total_steps for a in arrivals.jobs),
        "tenants": {
            t.name: {"guarantee_gpus": t.guarantee_gpus, "borrow_limit_gpus": t.borrow_limit_gpus, "weight": t.weight}
            for t in arrivals.tenants
        },
        "offered_load": offered_load(arrivals, estimates),
        "source": dict(arrivals.source),
        "policies": figures,
    }
    return result, runs


def offered_load(arrivals: ArrivalsFile, estimates: Mapping[str, float]) -> float:
    """GPU-time the day's jobs ask for (GPUs x run alone) over the cluster's GPU-time in the day."""
    asked = sum(a.spec.resources.num_gpus * estimates[a.job_id] for a in arrivals.jobs)
    return asked / (arrivals.cluster.num_devices * arrivals.day_s)
