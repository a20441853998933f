"""A job's environment (its tools and graders) in a Ray actor process of its own.

The trainer's episode loop keeps its :class:`~jigsaw_engine.envs.protocol.Environment`: the
dataset, the name and the turn limit are read once from a local copy (the warm-up needs them
anyway), and each episode's replies go to :class:`EnvironmentActor`, where the episode lives.
A tool call (a retriever query) then runs, and waits, beside the trainer rather than in it, and
a tool that takes its process down costs the job its step (the worker is lost, the job resumes
from its checkpoint), not the trainer's state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from itertools import count
from typing import Any

import ray

from jigsaw_engine.envs.protocol import Environment, EnvTask, Episode, Turn
from jigsaw_engine.runtime.ray.placement import unplaced
from jigsaw_engine.runtime.ray.worker_calls import call_worker

EnvironmentFactory = Callable[[], Environment]

MAX_OPEN_EPISODES = 1 << 16
"""Episodes the actor keeps at most. An episode is dropped when it ends (``done``); one the loop
ends itself (its turn limit, a truncated reply) is never told so, and goes when this many newer
ones have started: steps hold far fewer episodes at once."""


@ray.remote(max_restarts=0)
class EnvironmentActor:
    def __init__(self, factory: EnvironmentFactory) -> None:
        self._env = factory()
        self._episodes: OrderedDict[int, Episode] = OrderedDict()

    def respond(self, key: int, task: EnvTask, reply: str) -> Turn:
        """Episode ``key``'s answer to ``reply`` (the episode starts on ``task`` at its first reply)."""
        episode = self._episodes.get(key)
        if episode is None:
            episode = self._episodes[key] = self._env.episode(task)
            while len(self._episodes) > MAX_OPEN_EPISODES:
                self._episodes.popitem(last=False)
        turn = episode.respond(reply)
        if turn.done:
            del self._episodes[key]
        return turn

    def open_episodes(self) -> int:
        return len(self._episodes)


class _RemoteEpisode:
    def __init__(self, env: RemoteEnvironment, key: int, task: EnvTask) -> None:
        self._env, self._key, self._task = env, key, task

    def respond(self, reply: str) -> Turn:
        return self._env.respond(self._key, self._task, reply)


class RemoteEnvironment:
    """Implements :class:`Environment`; episodes run in an :class:`EnvironmentActor`."""

    def __init__(self, local: Environment, actor: Any) -> None:
        self.name = local.name
        self.max_turns = local.max_turns
        self._dataset = local.dataset()
        self._actor = actor
        self._keys = count()

    @classmethod
    def start(
        cls, local: Environment, factory: EnvironmentFactory, *, actor_options: Mapping[str, Any] | None = None
    ) -> RemoteEnvironment:
        """``actor_options`` place the process (:mod:`~jigsaw_engine.runtime.ray.placement`);
        by default it books nothing from Ray: tools mostly wait, and the scheduler decides who computes."""
        actor = EnvironmentActor.options(**(actor_options or unplaced())).remote(factory)  # type: ignore[attr-defined]
        env = cls(local, actor)
        env._call(actor.open_episodes)  # wait until it is built: a broken environment fails here
        return env

    def dataset(self) -> Sequence[EnvTask]:
        return self._dataset

    def episode(self, task: EnvTask) -> Episode:
        return _RemoteEpisode(self, next(self._keys), task)

    def respond(self, key: int, task: EnvTask, reply: str) -> Turn:
        turn: Turn = self._call(self._actor.respond, key, task, reply)
        return turn

    def _call(self, method: Any, *args: Any) -> Any:
        return call_worker(f"the environment process of {self.name!r}", method, *args)
