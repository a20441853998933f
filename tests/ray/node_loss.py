"""A Ray node lost under real jobs, and joining again: the engine on a Ray cluster of two nodes
started on this machine (a head and a second node, one core each), the engine planning two
nodes of one device, two tiny jobs trained for real with a checkpoint after every step.

Mid-step, the second node's processes (its raylet, its workers: the jobs' actors there) are
SIGKILLed, as a machine that goes. Then the engine must mark that node's device lost, hand back
the jobs whose work was there, and, as the control plane's reconciler resubmits them from their
checkpoints, run them on what remains or keep them waiting for devices, saying which; once a
new node joins, its device serves again. Every step of each job is reported once.

Its own Ray cluster (own ports, own temp folder), so it runs in a process of its own:

    .venv/bin/python -m tests.ray.node_loss [--steps 6] [--json out.json]

It prints one JSON object of what it measured (``tests/ray/test_node_loss.py`` checks it).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from devstack.launcher import BIN, MIB, RayHead, free_port, wait_port
from tests.train.test_real_runtime import tiny_spec

STEPS = 20
"""Enough that neither job ends before the node is declared dead (about 4 s after the kill
here), though on a loaded host one job may make ten steps before the other's first: both are
then handed back, and one of them must wait for the remaining device."""
NODE_DEATH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
"""Ray's GCS declares a node dead after this many missed health checks (by default every 3 s,
5 missed): a node's death is noticed in about 4 s, not 15."""
RESUBMIT_AFTER_S = 2.0
"""How long after a job is handed back it is submitted again: one pass of the reconciler as the
fault suite runs it (``RECONCILE_EVERY_S=2``; 10 s by default)."""
POLICY_CACHE = Path(tempfile.gettempdir()) / "jigsaw-node-loss-policies"
"""Warmed-up start policies, kept between runs (a warm-up costs seconds)."""


class TwoNodes:
    """A Ray head and other nodes joining it, each ``ray start --block`` leading its own
    process group: killing the group is that node going, and nothing else on the machine."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, command: list[str]) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start_head(self) -> None:
        command = RayHead(self.port, 1, self.tmp / "head", 96 * MIB).command()
        self._start("head", [*command, f"--system-config={json.dumps(NODE_DEATH_CHECKS)}"])
        wait_port(self.port, "the Ray head", timeout_s=120)

    def join(self, name: str) -> None:
        self._start(
            name,
            [
                str(BIN / "ray"), "start", "--block", f"--address=127.0.0.1:{self.port}", "--num-cpus=1",
                "--node-ip-address=127.0.0.1", "--disable-usage-stats", f"--temp-dir={self.tmp / name}",
                f"--object-store-memory={96 * MIB}",
            ],
        )  # fmt: skip

    def kill(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGKILL)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


class ControlPlane:
    """What the service's pump and reconciler do for the engine, in a loop: take in its events,
    and submit again, after its last reported step (its checkpoint), a job it handed back."""

    def __init__(self, engine: Any, specs: dict[str, dict[str, Any]], clock: Any) -> None:
        self.engine, self.specs, self.clock = engine, specs, clock
        self.cursor = 0
        self.steps: dict[str, list[tuple[int, float]]] = {pid: [] for pid in specs}
        self.statuses: dict[str, list[tuple[str, str, float]]] = {pid: [] for pid in specs}
        self.logs: dict[str, list[str]] = {pid: [] for pid in specs}
        self.attempts = dict.fromkeys(specs, 1)
        self.handed_back: dict[str, list[float]] = {pid: [] for pid in specs}
        self._gone_since: dict[str, float] = {}

    def poll(self) -> None:
        batch = self.engine.events_since(self.cursor, 10_000)
        self.cursor = batch.next_cursor
        now = self.clock()
        for event in batch.events:
            pid, kind, data = event.pipeline_id, event.kind.value, event.data
            if pid not in self.specs:
                continue
            if kind == "metrics":
                self.steps[pid].append((data["step"], now))
            elif kind == "status":
                self.statuses[pid].append((data["status"], data["reason"], now))
            elif kind == "log":
                self.logs[pid].append(data["message"])
        known = self.engine.pipeline_states()
        for pid, spec in self.specs.items():
            if pid in known or self.ended(pid):
                self._gone_since.pop(pid, None)
                continue
            if now - self._gone_since.setdefault(pid, now) < RESUBMIT_AFTER_S:
                continue
            del self._gone_since[pid]
            done = self.steps[pid][-1][0] if self.steps[pid] else 0
            self.handed_back[pid].append(now - RESUBMIT_AFTER_S)
            self.attempts[pid] += 1
            resumed = json.loads(json.dumps(spec))
            resumed["trainer"]["start_step"] = done
            self.engine.submit(pid, resumed)

    def ended(self, pid: str) -> bool:
        return bool(self.statuses[pid]) and self.statuses[pid][-1][0] in ("succeeded", "failed", "cancelled")

    def step_count(self, pid: str) -> int:
        return len(self.steps[pid])


def run(steps: int = STEPS) -> dict[str, Any]:
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    import ray

    from jigsaw_engine.api import EngineConfig, start_local_engine
    from jigsaw_engine.errors import SpecError
    from jigsaw_engine.runtime.ray.nodes import describe_groups
    from jigsaw_engine.runtime.ray.placement import DevicePlacement
    from jigsaw_engine.spec.cluster import ClusterSpec

    tmp = Path(tempfile.mkdtemp(prefix="jnl-", dir="/tmp"))  # short: Ray's socket paths have a length limit
    nodes = TwoNodes(tmp)
    out: dict[str, Any] = {"steps_planned": steps}
    origin = time.monotonic()

    def clock() -> float:
        return time.monotonic() - origin

    engine: Any = None
    try:
        nodes.start_head()
        ray.init(address=f"127.0.0.1:{nodes.port}", namespace="jigsaw", log_to_driver=False)  # on the head
        cluster = ClusterSpec(num_nodes=2, devices_per_node=1, device_type="cpu")

        # A node that never joined: the reservation is refused at once, naming what is missing.
        started = time.monotonic()
        try:
            DevicePlacement(cluster).remove()
            out["too_few_nodes"] = {"error": None}
        except SpecError as exc:
            out["too_few_nodes"] = {"error": str(exc), "seconds": round(time.monotonic() - started, 2)}

        nodes.join("second")
        while sum(1 for n in ray.nodes() if n.get("Alive")) < 2:
            time.sleep(0.2)
        out["cluster_up_s"] = round(clock(), 1)

        engine = start_local_engine(
            EngineConfig(
                cluster=cluster,
                mode="real",
                real_cache_dir=str(POLICY_CACHE),
                real_checkpoint_dir=str(tmp / "checkpoints"),  # every node reads and writes it
            ),
            pipeline_actors=True,
        )
        specs = {"a": tiny_spec("a", steps=steps), "b": tiny_spec("b", steps=steps, seed=1)}  # a checkpoint every step
        plane = ControlPlane(engine, specs, clock)
        for pid, spec in specs.items():
            engine.submit(pid, spec)

        def until(what: str, done: Any, timeout_s: float) -> None:
            deadline = time.monotonic() + timeout_s
            while not done():
                if time.monotonic() > deadline:
                    seen = {
                        "states": engine.pipeline_states(),
                        "statuses": plane.statuses,
                        "logs": plane.logs,
                        "steps": plane.steps,
                        "running": [s for s in engine.timeline(30.0)["spans"] if s["running"]],
                        "lost": engine.describe()["cluster"]["lost_devices"],
                        "actors": _actors(),
                        "ray_temp": str(tmp),
                    }
                    print(json.dumps(seen, indent=1, default=str), file=sys.stderr, flush=True)
                    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
                plane.poll()
                time.sleep(0.1)

        def running_on(device: int) -> bool:
            spans = engine.timeline(5.0)["spans"]
            return any(s["running"] and device in s["devices"] and s["kind"] != "load" for s in spans)

        until("a step of each job", lambda: all(plane.step_count(p) >= 1 for p in specs), 240)
        executor = engine._real.executor  # the engine's reservation: which Ray node holds each engine node
        groups = describe_groups(executor.placement)
        # This Ray starts its workers at nice 15 (`ray start`'s default); the engine's stay at 0.
        niceness = ray.remote(_niceness)
        probes = [niceness.options(**executor.placement.actor_options(d)).remote() for d in range(2)]
        out["device_niceness"] = ray.get(probes, timeout=120)
        second = {n["NodeID"] for n in ray.nodes() if n.get("Alive") and "node:__internal_head__" not in n["Resources"]}
        lost_node = next(g["node"] for g in groups if set(g["ray_nodes"]) & second)
        lost_device = lost_node * cluster.devices_per_node
        until(f"a sub-stage running on device {lost_device}", lambda: running_on(lost_device), 60)
        before = {pid: plane.step_count(pid) for pid in specs}
        killed_at = clock()
        nodes.kill("second")
        out["killed"] = {"at_s": round(killed_at, 1), "engine_node": lost_node, "steps_done": before}

        def lost_devices() -> list[dict[str, Any]]:
            described: list[dict[str, Any]] = engine.describe()["cluster"]["lost_devices"]
            return described

        until("the engine to mark the node's device lost", lambda: bool(lost_devices()), 90)
        out["lost_detected_s"] = round(clock() - killed_at, 1)
        out["lost_view"] = lost_devices()

        def progressed_after(pid: str, t: float) -> bool:
            return any(at > t for _, at in plane.steps[pid])

        # On what remains: some job steps on, the other waits for devices (its status says why).
        until("a step after the loss", lambda: any(progressed_after(p, killed_at) for p in specs), 120)

        def waiting() -> list[str]:
            return [p for p in specs if plane.statuses[p] and plane.statuses[p][-1][0] == "queued"]

        until("a job waiting for devices", lambda: bool(waiting()) or all(plane.ended(p) for p in specs), 120)
        out["waiting"] = {p: plane.statuses[p][-1][1] for p in waiting()}
        out["steps_while_lost"] = {p: [s for s, at in plane.steps[p] if at > killed_at] for p in specs}

        rejoined_at = clock()
        nodes.join("again")
        until("the node's device back", lambda: not lost_devices(), 120)
        out["back_detected_s"] = round(clock() - rejoined_at, 1)
        until("both jobs to end", lambda: all(plane.ended(p) for p in specs), 300)
        out["after_rejoin"] = {p: [s for s, at in plane.steps[p] if at > rejoined_at] for p in specs}
        asked_at = clock()
        window = engine.timeline(asked_at + 60.0)
        offset = window["now_s"] - asked_at  # engine seconds = these seconds + offset

        def spans_on_lost_device(since: float, until: float) -> int:
            return sum(
                1
                for s in window["spans"]
                if lost_device in s["devices"] and since + offset < s["start_s"] < until + offset
            )

        # From when the engine marked it lost to when a node began to join: nothing may start there.
        lost_since = out["lost_view"][0]["since_s"] - offset
        out["spans_on_lost_device"] = {
            "while_lost": spans_on_lost_device(lost_since, rejoined_at),
            "after_back": spans_on_lost_device(rejoined_at, asked_at),
        }
        out["jobs"] = {
            pid: {
                "status": plane.statuses[pid][-1][0],
                "reason": plane.statuses[pid][-1][1],
                "attempts": plane.attempts[pid],
                "steps": [s for s, _ in plane.steps[pid]],
                "handed_back_after_s": [round(t - killed_at, 1) for t in plane.handed_back[pid]],
                "first_step_after_loss_s": next(
                    (round(at - killed_at, 1) for _, at in plane.steps[pid] if at > killed_at), None
                ),
                "lost_lines": [m for m in plane.logs[pid] if "lost" in m],
            }
            for pid in specs
        }
        out["total_s"] = round(clock(), 1)
    finally:
        if engine is not None:
            engine.close()
        ray.shutdown()
        nodes.stop()
        if "jobs" in out:  # kept for Ray's logs otherwise
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _niceness() -> int:
    return os.nice(0)


def _actors() -> list[dict[str, Any]]:
    """Every actor Ray knows, for a report of what hung."""
    from ray.util.state import list_actors

    try:
        return [
            {"class": a.class_name, "state": a.state, "node": (a.node_id or "")[:12], "pid": a.pid}
            for a in list_actors(limit=500, raise_on_missing_output=False)
        ]
    except Exception as exc:  # the state API needs the dashboard's agent; say why not
        return [{"error": f"{type(exc).__name__}: {exc}"}]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    out = run(args.steps)
    text = json.dumps(out, indent=2)
    print(text, flush=True)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
