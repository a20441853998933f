"""The demo's stream of new jobs: its pacing and its choice of tenant and job, on a fake clock;
and the jobs the demo trickles (``devstack.demo``) are specs the demo's cluster and quotas accept."""

from __future__ import annotations

import pytest

from devstack import demo
from jigsaw_client.trickle import Trickle, TrickleJob
from jigsaw_engine import api as engine_api
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.presets import PRESETS, REAL_PRESETS

JOBS = [
    TrickleJob("acme", "math-grpo", {"trainer": {"total_steps": 1}}),
    TrickleJob("acme", "retrieval-qa"),
    TrickleJob("globex", "self-refine"),
    TrickleJob("globex", "math-grpo", {"trainer": {"total_steps": 2}}),
    TrickleJob("globex", "retrieval-qa"),
]
IDLE = {"acme": 0, "globex": 0}


def names(jobs: list[TrickleJob | None]) -> list[str]:
    return [f"{j.tenant}:{j.preset}:{dict(j.overrides)}" if j else "-" for j in jobs]


def test_tenants_take_turns_and_each_goes_round_its_own_list() -> None:
    trickle = Trickle(JOBS, jobs_per_minute=60, start=0.0)
    taken = [trickle.take(float(t), IDLE) for t in range(8)]
    assert [j.tenant for j in taken if j] == ["acme", "globex"] * 4
    assert [j for j in taken if j and j.tenant == "acme"] == [JOBS[0], JOBS[1], JOBS[0], JOBS[1]]
    assert [j for j in taken if j and j.tenant == "globex"] == [JOBS[2], JOBS[3], JOBS[4], JOBS[2]]
    assert trickle.handed_out == 8


def test_one_job_per_interval_on_time_whatever_the_polling() -> None:
    trickle = Trickle(JOBS, jobs_per_minute=6, start=100.0)  # one every 10 s from t=100
    assert trickle.take(99.9, IDLE) is None  # not yet due
    assert trickle.take(100.0, IDLE) is not None
    assert trickle.take(100.0, IDLE) is None and trickle.take(109.0, IDLE) is None
    # Polled late (every 1.7 s, say): the rhythm is kept, not pushed back by each lateness.
    assert trickle.take(111.5, IDLE) is not None
    assert trickle.due_at == 120.0
    times = [100.0 + 1.7 * k for k in range(60)]  # 100 s of polling
    trickle = Trickle(JOBS, jobs_per_minute=6, start=100.0)
    assert sum(trickle.take(t, IDLE) is not None for t in times) == 11  # t = 100, 110, ..., 200


def test_a_tenant_at_its_cap_is_passed_over_and_the_queue_stays_bounded() -> None:
    trickle = Trickle(JOBS, jobs_per_minute=60, start=0.0, max_in_flight=2)
    in_flight = {"acme": 2, "globex": 1}
    first = trickle.take(0.0, in_flight)
    assert first is not None and first.tenant == "globex"  # acme's turn, but acme is at its cap
    in_flight["globex"] += 1
    assert trickle.take(1.0, in_flight) is None  # both at the cap: nothing, however long
    assert trickle.take(500.0, in_flight) is None
    assert trickle.due(500.0)  # still due: the first free slot gets a job at once
    in_flight["acme"] -= 1
    nxt = trickle.take(501.0, in_flight)
    assert nxt is not None and nxt.tenant == "acme"
    # After the wait it starts again from now: no burst to catch up the missed minutes.
    assert trickle.due_at == 502.0
    assert trickle.take(501.0, {"acme": 0, "globex": 0}) is None


def test_unknown_tenant_counts_as_idle() -> None:
    trickle = Trickle(JOBS, jobs_per_minute=60, start=0.0, max_in_flight=1)
    job = trickle.take(0.0, {})
    assert job is not None and job.tenant == "acme"


def test_stops_after_max_jobs_or_at_stop_at() -> None:
    by_count = Trickle(JOBS, jobs_per_minute=60, start=0.0, max_jobs=3)
    assert names([by_count.take(float(t), IDLE) for t in range(5)])[3:] == ["-", "-"]
    assert by_count.handed_out == 3 and by_count.finished(5.0) and not by_count.due(100.0)
    by_time = Trickle(JOBS, jobs_per_minute=60, start=0.0, stop_at=2.5)
    assert [by_time.take(float(t), IDLE) is not None for t in range(5)] == [True, True, True, False, False]
    assert by_time.finished(2.5) and not by_time.finished(2.4)


def test_defer_waits_one_interval() -> None:
    trickle = Trickle(JOBS, jobs_per_minute=30, start=0.0)
    trickle.defer(7.0)
    assert trickle.take(8.0, IDLE) is None
    assert trickle.take(9.0, IDLE) is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"jobs_per_minute": 0}, "jobs_per_minute must be > 0"),
        ({"jobs_per_minute": 1, "max_in_flight": 0}, "max_in_flight must be >= 1"),
    ],
)
def test_refuses_a_trickle_that_cannot_run(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Trickle(JOBS, start=0.0, **kwargs)
    with pytest.raises(ValueError, match="at least one job"):
        Trickle([], jobs_per_minute=1, start=0.0)


@pytest.mark.parametrize(
    ("catalogue", "presets", "cluster", "mode"),
    [
        ("TRICKLE_JOBS", PRESETS, ClusterSpec(num_nodes=1, devices_per_node=8, device_type="h100"), "simulated"),
        ("REAL_TRICKLE_JOBS", REAL_PRESETS, ClusterSpec(num_nodes=1, devices_per_node=2, device_type="cpu"), "real"),
    ],
)
def test_the_demos_new_jobs_are_valid_mixed_and_fit_a_tenants_quota(
    catalogue: str, presets: tuple, cluster: ClusterSpec, mode: str
) -> None:
    jobs = getattr(demo, catalogue)
    specs = {p.name: p.spec for p in presets}
    resolved = []
    for job in jobs:
        spec = {**specs[job.preset], **job.overrides}
        assert engine_api.validate_spec(spec, cluster, mode=mode) == [], job
        resolved.append((job.tenant, engine_api.resolve_spec(spec)))
    # seed_demo's quota: half the cluster per job at most.
    assert max(r["resources"]["num_gpus"] for _, r in resolved) <= max(1, cluster.num_devices // 2)
    for tenant in ("acme", "globex"):
        own = [r for t, r in resolved if t == tenant]
        assert len({r["workload"] for r in own}) >= 2, tenant  # mixed workloads for each tenant
    if mode == "simulated":
        assert len({r["resources"]["num_gpus"] for _, r in resolved}) >= 3  # mixed sizes: 1, 2 and 4 GPUs
