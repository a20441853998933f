"""Fault scenarios and what must hold after each: every job reaches a correct end, none runs
twice, no training step is lost or repeated, the usage ledger matches what ran, and a
dashboard's event stream resumes with nothing missing."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import psycopg

from tests.engine.builders import make_spec
from tests.faults.followers import EventFollower
from tests.faults.stack import FaultStack

STEPS = 12
FAILPOINT_LINE = "failpoint dispatch.after_submit"
DISPATCH_PAUSE_S = 3.0


REAL_STEPS = 3


def job_spec(name: str) -> dict[str, object]:
    """A simulated full-size job; it checkpoints after every step."""
    return make_spec(name=name, trainer={"total_steps": STEPS, "save_freq": 1})


def real_job_spec(name: str) -> dict[str, object]:
    """A tiny job trained for real on this machine's cores."""
    return {
        "name": name,
        "model": "tiny-qwen2-1m",
        "workload": "gsm8k",
        "data": {"train_batch_size": 8},
        "rollout": {"n": 4, "max_response_length": 8},
        "resources": {"num_gpus": 1},
        "trainer": {"total_steps": REAL_STEPS, "save_freq": 1},
    }


@dataclass
class Outcome:
    fault: str
    final: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    steps_ok: bool = False
    ran_once: bool = False
    ledger_ok: bool = False
    stream_ok: bool = False
    recovered_s: float | None = None
    supervisor_restarts: list[str] = field(default_factory=list)
    """Processes that died on their own and were started again, as compose would."""
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Scenario:
    fault: str
    inject: Callable[[FaultStack], None]
    when: str
    """``dispatch``: while a dispatch waits at its failpoint; ``step:<n>``: once a job (every job,
    where the engine loses them) passed step n; ``running:<kind>``: while a job's sub-stage of
    that kind runs, after its first step."""
    engine_loses_jobs: bool = False
    """The engine forgets its pipelines: each job resumes from its checkpoint (a second attempt)."""
    worker_env: dict[str, str] = field(default_factory=dict)
    real: bool = False
    """Real tiny jobs (one tenant's) on a real-mode stack, instead of two tenants' simulated ones."""

    @property
    def steps(self) -> int:
        return REAL_STEPS if self.real else STEPS

    @property
    def tenants(self) -> tuple[str, ...]:
        return ("acme",) if self.real else ("acme", "globex")


# -- the faults ------------------------------------------------------------------------------
def kill_worker_mid_dispatch(stack: FaultStack) -> None:
    stack.kill_process("worker")
    stack.start_process("worker")


def kill_engine_controller(stack: FaultStack) -> None:
    """SIGKILL the process of the engine's Ray actor; Ray starts it again, empty."""
    _kill_actor_processes(stack, "EngineActor", "engine actor")


def _kill_actor_processes(stack: FaultStack, actor: str, what: str) -> None:
    """SIGKILL this stack's ``ray::<actor>`` processes, and only those: a test session running
    beside the suite keeps its own."""
    pids = stack.ray_actor_processes(actor)
    if not pids:
        raise RuntimeError(f"no {what} process found")
    subprocess.run(["kill", "-9", *map(str, pids)], check=True)


def kill_job_worker(stack: FaultStack) -> None:
    """SIGKILL the real job's own actor process (its trainer and episode loop); the engine
    hands the job back and the reconciler resumes it from its checkpoint."""
    _kill_actor_processes(stack, "PipelineActor", "job worker")


def kill_rollout_worker(stack: FaultStack) -> None:
    """SIGKILL the real job's rollout workers' actor processes (each holds a rollout engine);
    the job's step is lost with them and resumed from the checkpoint, as for its trainer."""
    _kill_actor_processes(stack, "RolloutEngineActor", "rollout worker")


def restart_redis(stack: FaultStack) -> None:
    stack.redis.kill()
    time.sleep(1.0)
    stack.redis.start()


def restart_postgres(stack: FaultStack) -> None:
    stack.postgres.stop("immediate")
    time.sleep(1.0)
    stack.postgres.start()


def restart_web(stack: FaultStack) -> None:
    stack.kill_process("web")
    stack.start_process("web")


SCENARIOS = [
    Scenario(
        "Celery worker killed mid-dispatch",
        kill_worker_mid_dispatch,
        "dispatch",
        worker_env={"JIGSAW_FAILPOINTS": f"dispatch.after_submit=sleep:{DISPATCH_PAUSE_S}"},
    ),
    Scenario("engine controller killed", kill_engine_controller, "step:2", engine_loses_jobs=True),
    Scenario("Redis restarted", restart_redis, "step:2"),
    Scenario("Postgres restarted", restart_postgres, "step:2"),
    Scenario("web server killed", restart_web, "step:2"),
    # Real mode: each job's trainer runs in an actor process of its own, and each of its rollout
    # workers in another. Killing the rollout workers mid-generation or the trainer between two
    # optimizer steps of an update costs the job its step; killing the engine mid-generation
    # takes every job's actors with it.
    Scenario(
        "rollout worker killed mid-generation (real)",
        kill_rollout_worker,
        "running:decode",
        engine_loses_jobs=True,
        real=True,
    ),
    Scenario(
        "job trainer killed mid-update (real)", kill_job_worker, "running:train", engine_loses_jobs=True, real=True
    ),
    Scenario(
        "engine killed mid-generation (real)",
        kill_engine_controller,
        "running:decode",
        engine_loses_jobs=True,
        real=True,
    ),
]
REAL_FAILPOINTS = "rollout.mid_generation=sleep:1,train.mid_update=sleep:1"
"""Each real rollout and update waits here, so that the kill lands inside one."""


# -- running one ------------------------------------------------------------------------------
def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def _log_mentions(stack: FaultStack, name: str, text: str, since: int) -> bool:
    return text in (stack.log_dir / f"{name}.log").read_text(errors="replace")[since:]


def _running(stack: FaultStack, tenant: str, kind: str, *, after_step: int) -> bool:
    """Whether the cluster page shows one of the tenant's jobs running a ``kind`` sub-stage
    of a step after ``after_step``."""
    spans = stack.api_retrying("GET", "/api/v1/cluster/timeline?window_s=30", tenant)["spans"]
    return any(s["running"] and s["job"] and s["kind"] == kind and s["step"] > after_step for s in spans)


def run_scenario(stack: FaultStack, scenario: Scenario, index: int) -> Outcome:
    outcome = Outcome(scenario.fault)
    restarts_before = len(stack.supervisor_restarts)
    if scenario.worker_env:
        stack.kill_process("worker")
        stack.start_process("worker", scenario.worker_env)
    worker_log_at = len((stack.log_dir / "worker.log").read_text(errors="replace"))
    make = real_job_spec if scenario.real else job_spec
    jobs = {
        tenant: stack.api("POST", "/api/v1/jobs", tenant, {"spec": make(f"fault-{index}-{tenant}")})["id"]
        for tenant in scenario.tenants
    }
    followers = {job_id: EventFollower(stack.base, stack.tokens[t], job_id) for t, job_id in jobs.items()}
    for follower in followers.values():
        follower.start()

    def steps() -> dict[str, int]:
        return {j: stack.api_retrying("GET", f"/api/v1/jobs/{j}", t)["progress"]["step"] for t, j in jobs.items()}

    try:
        if scenario.when == "dispatch":
            at_failpoint = lambda: _log_mentions(stack, "worker", FAILPOINT_LINE, worker_log_at)  # noqa: E731
            _wait(at_failpoint, 60, "a dispatch at its failpoint")
        elif scenario.when.startswith("running:"):
            kind = scenario.when.split(":")[1]
            _wait(lambda: _running(stack, scenario.tenants[0], kind, after_step=1), 240, f"a running {kind} sub-stage")
        else:
            # Where the engine loses its jobs, every job must be past it, so that every job is on
            # the engine when the fault lands: a job still being dispatched when the engine dies is
            # never lost (one attempt, not two). Elsewhere the first job past it will do: waiting
            # for the last let the first end before the fault.
            threshold = int(scenario.when.split(":")[1])
            past = min if scenario.engine_loses_jobs else max
            _wait(lambda: past(steps().values()) >= threshold, 90, f"jobs past step {threshold}")
        if any(f.done.is_set() for f in followers.values()):
            outcome.problems.append("a job ended before the fault landed; the scenario's jobs must run longer")
        injected = time.monotonic()
        injected_at = datetime.now(UTC)
        scenario.inject(stack)
        if scenario.worker_env:  # later scenarios dispatch without the pause
            stack.kill_process("worker")
            stack.start_process("worker")

        def progressed() -> bool:
            """Every job has billed a step that finished after the fault (or has ended)."""
            try:
                with psycopg.connect(stack.postgres.url("jigsaw_faults"), connect_timeout=2) as db:
                    fresh = db.execute(
                        "SELECT count(DISTINCT job_id) FROM jobs_usagerecord WHERE step IS NOT NULL "
                        "AND created_at > %s AND job_id = ANY(%s)",
                        (injected_at, list(jobs.values())),
                    ).fetchone()
            except psycopg.OperationalError:
                return False  # still down
            ended = sum(1 for j in jobs.values() if followers[j].done.is_set())
            return fresh is not None and fresh[0] + ended >= len(jobs)

        _wait(progressed, 180, "progress after the fault")
        outcome.recovered_s = time.monotonic() - injected
        _wait(lambda: all(f.done.is_set() for f in followers.values()), 150, "every job to end")
    except TimeoutError as exc:
        outcome.problems.append(str(exc))
    finally:
        for follower in followers.values():
            follower.stop()
    outcome.supervisor_restarts = stack.supervisor_restarts[restarts_before:]
    _check(stack, scenario, jobs, followers, outcome)
    return outcome


def _check(
    stack: FaultStack, scenario: Scenario, jobs: dict[str, str], followers: dict[str, EventFollower], outcome: Outcome
) -> None:
    expected_attempts = 2 if scenario.engine_loses_jobs else 1
    steps_ok = ran_once = ledger_ok = stream_ok = True
    with psycopg.connect(stack.postgres.url("jigsaw_faults")) as db:
        for tenant, job_id in jobs.items():
            job = stack.api_retrying("GET", f"/api/v1/jobs/{job_id}", tenant)
            outcome.final[tenant] = job["status"]
            outcome.attempts[tenant] = job["attempt"]
            if job["status"] != "succeeded":
                outcome.problems.append(f"{tenant}: ended {job['status']} ({job['status_reason']})")
            stored = "SELECT step, (values->>'usage/device_seconds')::float FROM jobs_jobmetrics WHERE job_id = %s"
            metrics = dict(db.execute(stored, (job_id,)).fetchall())
            if sorted(metrics) != list(range(1, scenario.steps + 1)):
                steps_ok = False
                outcome.problems.append(f"{tenant}: steps stored {sorted(metrics)}")
            # Each step ran once per attempt at most, and only steps after the checkpoint the
            # job resumed from ran again.
            bills = db.execute(
                "SELECT step, gpu_seconds FROM jobs_usagerecord WHERE job_id = %s AND step IS NOT NULL ORDER BY id",
                (job_id,),
            ).fetchall()
            billed = Counter(step for step, _ in bills)
            if job["attempt"] != expected_attempts:
                ran_once = False
                outcome.problems.append(f"{tenant}: {job['attempt']} attempts, expected {expected_attempts}")
            if any(count > job["attempt"] for count in billed.values()):
                ran_once = False
                outcome.problems.append(f"{tenant}: a step ran more often than the job was started: {billed}")
            if not scenario.engine_loses_jobs and any(count > 1 for count in billed.values()):
                ran_once = False
                outcome.problems.append(f"{tenant}: steps repeated without a recovery: {billed}")
            first_bill: dict[int, float] = {}
            for step, seconds in bills:
                first_bill.setdefault(step, seconds)
            all_bills = db.execute("SELECT gpu_seconds FROM jobs_usagerecord WHERE job_id = %s", (job_id,))
            total = sum(seconds for (seconds,) in all_bills)
            if set(first_bill) != set(metrics) or any(abs(first_bill[s] - metrics[s]) > 1e-6 for s in metrics):
                ledger_ok = False
                outcome.problems.append(f"{tenant}: the ledger's steps disagree with the steps that ran")
            if abs(total - job["gpu_seconds"]) > 1e-3 or total < sum(metrics.values()) - 1e-6:
                ledger_ok = False
                outcome.problems.append(f"{tenant}: ledger {total:.1f} GPU-s, job shows {job['gpu_seconds']:.1f}")
            follower = followers[job_id]
            if not (follower.done.is_set() and follower.gapless() and follower.statuses[-1:] == ["succeeded"]):
                stream_ok = False
                outcome.problems.append(
                    f"{tenant}: stream saw {len(follower.seqs)} events (gapless {follower.gapless()}), "
                    f"last status {follower.statuses[-1:]}, of {job['last_event_seq']}"
                )
    outcome.steps_ok, outcome.ran_once, outcome.ledger_ok, outcome.stream_ok = steps_ok, ran_once, ledger_ok, stream_ok


def format_table(outcomes: list[Outcome]) -> str:
    mark = {True: "yes", False: "NO"}
    lines = [
        "| fault | jobs ended | attempts | steps 1..N once | ran once | ledger matches | stream resumed "
        "| a step again after | restarted by the supervisor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        ended = ", ".join(sorted(set(o.final.values()))) or "-"
        attempts = ", ".join(str(a) for a in o.attempts.values()) or "-"
        recovered = f"{o.recovered_s:.1f} s" if o.recovered_s is not None else "-"
        restarted = ", ".join(o.supervisor_restarts) or "-"
        lines.append(
            f"| {o.fault} | {ended} | {attempts} | {mark[o.steps_ok]} | {mark[o.ran_once]} | {mark[o.ledger_ok]} "
            f"| {mark[o.stream_ok]} | {recovered} | {restarted} |"
        )
    problems = [f"- {o.fault}: {p}" for o in outcomes for p in o.problems]
    return "\n".join(lines + (["", *problems] if problems else []))
