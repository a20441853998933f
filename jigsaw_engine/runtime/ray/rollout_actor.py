"""A rollout worker in its own Ray actor process, behind the :class:`RolloutEngine` interface.

The job's process (trainer, environment, episode bookkeeping) keeps driving episodes exactly as
with an engine of its own: :class:`RemoteRolloutEngine` forwards every call to a
:class:`RolloutEngineActor` that holds the real engine (torch or vLLM) and its copy of the
policy. The generation then runs in a separate process, pinned to the cores the scheduler gave
that worker, and a rollout worker that dies (killed, out of memory) is reported as
:class:`~jigsaw_engine.errors.WorkerLostError`: the job resumes from its checkpoint instead of
failing.

A round trip to an actor costs about a millisecond, as much as a tiny model's decode iteration,
so :meth:`RemoteRolloutEngine.step_until_finished` runs iterations until a request finishes in
one call; the episode loop uses it where an engine has it (nothing happens there between
iterations where no request finishes).

On a GPU cluster a rollout worker follows the scheduler's placement
(:class:`PlacedRolloutEngine`): its engine runs in a process holding the one GPU its decode
nodes were placed on, started there with the worker's latest weights when the scheduler first
places it there, and the process on the GPU it left is ended (its memory freed).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
import torch

from jigsaw_engine.models.loading import weights_digest
from jigsaw_engine.rollout.protocol import (
    MEMORY_RELEASED,
    ExportedRequest,
    FinishedRequest,
    IterationStats,
    RolloutEngine,
    RolloutRequest,
)
from jigsaw_engine.runtime.ray.placement import devices_seen, unplaced
from jigsaw_engine.runtime.ray.worker_calls import call_worker

EngineFactory = Callable[[], RolloutEngine]


@ray.remote(max_restarts=0)
class RolloutEngineActor:
    """Holds one rollout engine; built in the actor from ``factory`` (a model copy travels pickled)."""

    def __init__(self, factory: EngineFactory, torch_threads: int = 1) -> None:
        torch.set_num_threads(torch_threads)
        self._engine = factory()
        self._loaded: str | None = None
        """Digest of the weights last loaded (None: the factory's own)."""

    def pid(self) -> int:
        return os.getpid()

    def seen(self) -> dict[str, Any]:
        return devices_seen()

    def report(self) -> dict[str, Any]:
        """What Ray gave this process (:func:`devices_seen`) and a digest of the weights the
        engine serves: its model's own where it exposes one (the torch engine), else of the
        weights it last loaded."""
        model = getattr(self._engine, "model", None)
        serving = weights_digest(model.state_dict()) if model is not None else self._loaded
        return {**devices_seen(), "weights": serving}

    def pin(self, cores: tuple[int, ...]) -> None:
        """Run on these cores from now on (a CPU cluster's devices are its cores)."""
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(cores))

    def add_requests(self, requests: list[RolloutRequest]) -> None:
        for request in requests:
            self._engine.add_request(request)

    def abort_request(self, request_id: str) -> FinishedRequest | None:
        return self._engine.abort_request(request_id)

    def export_requests(self, request_ids: list[str] | None) -> list[ExportedRequest]:
        return self._engine.export_requests(request_ids)

    def import_requests(self, exported: list[ExportedRequest]) -> None:
        self._engine.import_requests(exported)

    def step(self, until_finished: bool) -> tuple[list[FinishedRequest], IterationStats]:
        """One iteration, or (``until_finished``) iterations until a request finishes or none is
        left: (finished, the last iteration's stats)."""
        finished = self._engine.step()
        while until_finished and not finished and self._engine.has_unfinished():
            finished = self._engine.step()
        return finished, self._engine.last_iteration()

    def has_unfinished(self) -> bool:
        return self._engine.has_unfinished()

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        self._engine.load_weights(weights)
        self._loaded = weights_digest(weights)

    def release_memory(self) -> str:
        return self._engine.release_memory()

    def reclaim_memory(self) -> None:
        self._engine.reclaim_memory()


class RemoteRolloutEngine:
    """Implements :class:`RolloutEngine` over a :class:`RolloutEngineActor`.

    New requests are sent with the next call that needs them, so a batch of first turns costs
    one round trip. This side keeps the ids of the requests in the engine (added or imported,
    not yet finished, aborted or exported), so it refuses a duplicate at once and answers
    ``has_unfinished`` without a call.
    """

    def __init__(self, actor: Any, *, name: str) -> None:
        self._actor = actor
        self._name = name
        self._pending: list[RolloutRequest] = []
        self._ids: set[str] = set()
        self._last = IterationStats(running=0, decode_tokens=0, prefill_tokens=0)

    @classmethod
    def start(
        cls,
        factory: EngineFactory,
        *,
        name: str,
        torch_threads: int = 1,
        actor_options: Mapping[str, Any] | None = None,
    ) -> RemoteRolloutEngine:
        """``actor_options`` place the process (:mod:`~jigsaw_engine.runtime.ray.placement`); by
        default it books nothing from Ray. Either way the scheduler picks its cores (``pin``)."""
        options = actor_options or unplaced()
        actor = RolloutEngineActor.options(**options).remote(factory, torch_threads)  # type: ignore[attr-defined]
        engine = cls(actor, name=name)
        engine._call(actor.has_unfinished)  # wait until it is built: a broken factory fails here
        return engine

    def _call(self, method: Any, *args: Any) -> Any:
        return call_worker(f"rollout worker {self._name}", method, *args)

    def _flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self._call(self._actor.add_requests, pending)

    def _check_new(self, request_id: str) -> None:
        if request_id in self._ids:
            raise ValueError(f"request_id: {request_id!r} is already in this engine; ids must be unique")

    def pin(self, cores: tuple[int, ...]) -> None:
        self._call(self._actor.pin, cores)

    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = self._call(self._actor.report)
        return report

    def seen(self) -> dict[str, Any]:
        """What Ray gave its process (:func:`devices_seen`)."""
        seen: dict[str, Any] = self._call(self._actor.seen)
        return seen

    def shutdown(self) -> None:
        ray.kill(self._actor, no_restart=True)

    def add_request(self, request: RolloutRequest) -> None:
        self._check_new(request.request_id)
        self._pending.append(request)
        self._ids.add(request.request_id)

    def abort_request(self, request_id: str) -> FinishedRequest | None:
        self._flush()
        finished: FinishedRequest | None = self._call(self._actor.abort_request, request_id)
        self._ids.discard(request_id)
        return finished

    def export_requests(self, request_ids: Sequence[str] | None = None) -> list[ExportedRequest]:
        self._flush()
        exported: list[ExportedRequest] = self._call(
            self._actor.export_requests, None if request_ids is None else list(request_ids)
        )
        self._ids.difference_update(e.request.request_id for e in exported)
        return exported

    def import_requests(self, exported: Sequence[ExportedRequest]) -> None:
        for item in exported:
            self._check_new(item.request.request_id)
        self._flush()
        self._call(self._actor.import_requests, list(exported))
        self._ids.update(e.request.request_id for e in exported)

    def step(self) -> list[FinishedRequest]:
        return self._step(until_finished=False)

    def step_until_finished(self) -> list[FinishedRequest]:
        """Iterations until a request finishes (or none is left), in one round trip."""
        return self._step(until_finished=True)

    def _step(self, *, until_finished: bool) -> list[FinishedRequest]:
        self._flush()
        finished, self._last = self._call(self._actor.step, until_finished)
        self._ids.difference_update(f.request_id for f in finished)
        return list(finished)

    def has_unfinished(self) -> bool:
        return bool(self._ids)

    def num_unfinished(self) -> int:
        return len(self._ids)

    def last_iteration(self) -> IterationStats:
        return self._last

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        self._call(self._actor.load_weights, ray.put(dict(weights)))

    def release_memory(self) -> str:
        if self._ids:
            return "kept: requests in flight"
        released: str = self._call(self._actor.release_memory)
        return released

    def reclaim_memory(self) -> None:
        self._call(self._actor.reclaim_memory)


PlacedFactory = Callable[[float | None], RolloutEngine]
"""Builds a rollout engine given the share of its GPU's memory the scheduler planned for it
(None: not known yet)."""


class PlacedRolloutEngine:
    """A rollout worker on a GPU cluster: :class:`RolloutEngine` over a :class:`RemoteRolloutEngine`
    whose process holds exactly the device the scheduler last placed the worker on.

    Its process starts at the first :meth:`place` (the job's process calls it before each of
    the worker's rollout nodes); requests queued before that wait here. When a later rollout is
    placed on another device, the old process ends (its GPU memory freed) and one starts there
    with the newest weights this worker was given; requests still in it move along, exported
    and re-prefilled as a migrated tail is (sampling is portable, so they continue exactly).
    """

    def __init__(
        self,
        factory: PlacedFactory,
        *,
        name: str,
        placement: Callable[[int], Mapping[str, Any]],
        device: int,
        torch_threads: int = 1,
    ) -> None:
        self._factory, self._name, self._placement = factory, name, placement
        self._torch_threads = torch_threads
        self.device = device
        """The device its engine lives on (before it is started: where it would start)."""
        self.moves = 0
        """How often it moved to another device."""
        self.seen: dict[str, Any] = {}
        """What its current process was given (:func:`devices_seen`); empty before it starts."""
        self._engine: RemoteRolloutEngine | None = None
        self._queued: list[ExportedRequest] = []
        """Requests given before its process started."""
        self._weights: Mapping[str, torch.Tensor] | None = None
        """The newest weights it was given (a process started later loads them)."""
        self._lock = threading.RLock()

    def place(self, devices: Sequence[int], memory_share: float | None = None) -> None:
        """Run on ``devices[0]`` from now on (a rollout worker holds one device); its engine is
        given ``memory_share`` of that GPU's memory when it starts there."""
        if not devices:
            return
        with self._lock:
            if self._engine is not None and devices[0] == self.device:
                return
            if self._engine is not None:
                self._queued = self._engine.export_requests() + self._queued
                self._engine.shutdown()
                self._engine = None
                self.moves += 1
            self.device = devices[0]
            self._start(memory_share)

    def _start(self, memory_share: float | None) -> RemoteRolloutEngine:
        engine = RemoteRolloutEngine.start(
            functools.partial(self._factory, memory_share),
            name=f"{self._name}@{self.device}",
            torch_threads=self._torch_threads,
            actor_options=self._placement(self.device),
        )
        if self._weights is not None:
            engine.load_weights(self._weights)
        if self._queued:
            engine.import_requests(self._queued)
            self._queued = []
        self.seen = engine.seen()
        self._engine = engine
        return engine

    def _started(self) -> RemoteRolloutEngine:
        """Its engine, started where it is (a call that needs one before any placement)."""
        return self._engine if self._engine is not None else self._start(None)

    def report(self) -> dict[str, Any]:
        """Its device and moves, and what its process reports (:meth:`RolloutEngineActor.report`)
        once it has one."""
        with self._lock:
            started = self._engine.report() if self._engine is not None else {}
            return {"device": self.device, "moves": self.moves, "started": bool(started), **started}

    def shutdown(self) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()

    # -- RolloutEngine -----------------------------------------------------------------------------
    def add_request(self, request: RolloutRequest) -> None:
        with self._lock:
            if self._engine is None:
                self._queued.append(ExportedRequest(request, (), ()))
            else:
                self._engine.add_request(request)

    def abort_request(self, request_id: str) -> FinishedRequest | None:
        with self._lock:
            return self._started().abort_request(request_id)

    def export_requests(self, request_ids: Sequence[str] | None = None) -> list[ExportedRequest]:
        with self._lock:
            return self._started().export_requests(request_ids)

    def import_requests(self, exported: Sequence[ExportedRequest]) -> None:
        with self._lock:
            if self._engine is None:
                self._queued.extend(exported)
            else:
                self._engine.import_requests(exported)

    def step(self) -> list[FinishedRequest]:
        with self._lock:
            return self._started().step()

    def step_until_finished(self) -> list[FinishedRequest]:
        with self._lock:
            return self._started().step_until_finished()

    def has_unfinished(self) -> bool:
        with self._lock:
            return bool(self._queued) or (self._engine is not None and self._engine.has_unfinished())

    def num_unfinished(self) -> int:
        with self._lock:
            return len(self._queued) + (self._engine.num_unfinished() if self._engine is not None else 0)

    def last_iteration(self) -> IterationStats:
        with self._lock:
            return self._started().last_iteration()

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        with self._lock:
            self._weights = dict(weights)
            if self._engine is not None:
                self._engine.load_weights(weights)

    def release_memory(self) -> str:
        with self._lock:
            return MEMORY_RELEASED if self._engine is None else self._engine.release_memory()

    def reclaim_memory(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.reclaim_memory()
