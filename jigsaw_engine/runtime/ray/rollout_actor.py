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
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
import torch

from jigsaw_engine.rollout.protocol import (
    ExportedRequest,
    FinishedRequest,
    IterationStats,
    RolloutEngine,
    RolloutRequest,
)
from jigsaw_engine.runtime.ray.placement import unplaced
from jigsaw_engine.runtime.ray.worker_calls import call_worker

EngineFactory = Callable[[], RolloutEngine]


@ray.remote(max_restarts=0)
class RolloutEngineActor:
    """Holds one rollout engine; built in the actor from ``factory`` (a model copy travels pickled)."""

    def __init__(self, factory: EngineFactory, torch_threads: int = 1) -> None:
        torch.set_num_threads(torch_threads)
        self._engine = factory()

    def pid(self) -> int:
        return os.getpid()

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
