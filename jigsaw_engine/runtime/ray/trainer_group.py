"""A real job's policy trainer across a worker group: one Ray actor per device, FSDP2 among them.

A job that asks for several devices trains on as many processes, one per device, each holding a
slice of the policy and of its optimizer state (:mod:`jigsaw_engine.train.fsdp`); on GPUs that
is FSDP2 over NCCL, on this machine's cores the same code over gloo. :class:`TrainerGroup`
offers the one-process trainer's methods (:class:`~jigsaw_engine.train.policy_trainer.ActorTrainer`),
so the job's step does not change: each call goes to every rank at once (every method is a
collective) and rank 0's answer comes back. The log-prob forwards, the update's optimizer steps,
the weights for the rollout workers and the checkpoint all run sharded; so does PPO's critic
(:class:`CriticGroup`), whose slices live on the same ranks beside the policy's.

On a GPU cluster each rank is a process holding exactly one GPU, the one its device's bundle
reserved, and the group follows the scheduler: it forms on the devices of the first training
sub-stage, and when a later one is placed on other devices it forms again there, carrying its
whole state across (the context switch the scheduler charges for moving a job's training).
What each rank computes on is its own process's :func:`~jigsaw_engine.models.compute.resolve_compute_device`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from jigsaw_engine.errors import WorkerLostError
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.runtime.ray.placement import devices_seen
from jigsaw_engine.train.critic import CriticConfig, CriticTrainer
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer, plan_updates
from jigsaw_engine.train.token_batch import TokenBatch

COLLECTIVE_TIMEOUT_S = 300.0
"""How long a rank waits in a collective for the others (a lost rank fails the rest in time)."""
PEER_DEATH_WAIT_S = 10.0
"""How long a failed collective waits for Ray to report a rank's process dead."""
CRITIC_PREFIX = "critic."


@ray.remote(max_restarts=0)
class TrainerRankActor:
    """One rank: its slice of the policy (and of the KL reference, and of PPO's critic) and of
    their optimizer states."""

    def __init__(
        self,
        model: torch.nn.Module,
        config: ActorConfig,
        keep_reference: bool,
        critic_config: CriticConfig | None = None,
    ) -> None:
        torch.set_num_threads(1)
        self._model, self._config, self._keep_reference = model, config, keep_reference
        self._critic_config = critic_config
        self._trainer: PolicyTrainer | None = None
        self._critic: CriticTrainer | None = None

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0's address for the group: this node's IP and a free port."""
        with socket.socket() as s:
            s.bind(("", 0))
            return ray.util.get_node_ip_address(), int(s.getsockname()[1])

    def join(self, address: str, port: int, rank: int, world: int) -> None:
        from jigsaw_engine.train.fsdp import data_parallel_mesh

        compute = resolve_compute_device()
        compute.bind()
        torch.distributed.init_process_group(
            compute.collective_backend,
            init_method=f"tcp://{address}:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
        )
        mesh = data_parallel_mesh(compute.kind)
        if self._critic_config is not None:  # first: the critic copies the policy before it is sharded in place
            self._critic = CriticTrainer(self._model, self._critic_config, mesh=mesh, compute=compute)
        self._trainer = PolicyTrainer(
            self._model, self._config, keep_reference=self._keep_reference, mesh=mesh, compute=compute
        )

    def seen(self) -> dict[str, Any]:
        """The GPUs Ray gave this rank's process (:func:`devices_seen`)."""
        return devices_seen()

    def pin(self, cores: tuple[int, ...]) -> None:
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(cores))

    def call(self, method: str, *args: Any) -> Any:
        """The policy trainer's ``method``, or with a ``critic.`` prefix the critic's."""
        assert self._trainer is not None, "join() first"
        target: object = self._trainer
        if method.startswith(CRITIC_PREFIX):
            assert self._critic is not None, "this group was built without a critic"
            target, method = self._critic, method.removeprefix(CRITIC_PREFIX)
        return getattr(target, method)(*args)


class TrainerGroup:
    """Implements :class:`~jigsaw_engine.train.policy_trainer.ActorTrainer` over ``world`` ranks."""

    def __init__(
        self,
        model: torch.nn.Module,
        config: ActorConfig,
        *,
        world: int,
        keep_reference: bool = False,
        critic_config: CriticConfig | None = None,
        actor_options: Sequence[Mapping[str, Any]] = (),
        placement: Callable[[int], Mapping[str, Any]] | None = None,
        devices: Sequence[int] = (),
    ) -> None:
        """``actor_options[r]`` places rank ``r`` (:mod:`~jigsaw_engine.runtime.ray.placement`);
        ``critic_config``: PPO's critic too, built from ``model`` and sharded on the same ranks.

        ``placement`` (a device's actor options) instead: the group follows the devices it is
        given (:meth:`place`), a rank on each; it forms when first placed or first called (on
        ``devices``, by default ``0 .. world - 1``)."""
        if world < 1:
            raise ValueError(f"world: a trainer group has at least 1 rank, got {world}")
        self.config = config
        self._model, self._keep_reference, self._critic_config = model, keep_reference, critic_config
        self._placement = placement
        self.devices: tuple[int, ...] = tuple(devices) or tuple(range(world))
        """The devices its ranks hold (with ``placement``), rank ``r`` on ``devices[r]``."""
        self.moves = 0
        """How often it formed again on other devices."""
        self._ranks: list[Any] | None = None
        self._seen: list[dict[str, Any]] = []
        self.critic = CriticGroup(self, critic_config) if critic_config is not None else None
        # As PolicyTrainer decides it, so it is known before any rank exists.
        self.reference: object | None = True if config.kl_coef > 0 or keep_reference else None
        if placement is None:
            options = list(actor_options) or [{"num_cpus": 0}] * world
            self._form(options)

    def _form(self, options: Sequence[Mapping[str, Any]]) -> None:
        world = len(options)
        ranks = [
            TrainerRankActor.options(**options[r]).remote(  # type: ignore[attr-defined]
                self._model, self.config, self._keep_reference, self._critic_config
            )
            for r in range(world)
        ]
        self._ranks = ranks
        address, port = self._gather([ranks[0].rendezvous.remote()])[0]
        self._gather([rank.join.remote(address, port, r, world) for r, rank in enumerate(ranks)])
        self._seen = self._gather([rank.seen.remote() for rank in ranks])

    def _live_ranks(self) -> list[Any]:
        if self._ranks is None:
            self.place(self.devices)
        assert self._ranks is not None
        return self._ranks

    def place(self, devices: Sequence[int]) -> None:
        """A rank on each of ``devices`` from now on (a group built with ``placement``): formed
        there if it has no ranks yet; formed again there, with the policy's (and the critic's)
        whole state and optimizer carried over, if it lives on other devices. The KL
        reference is the start policy either way."""
        devices = tuple(devices)
        if self._placement is None or not devices:
            return
        if self._ranks is not None and devices == self.devices:
            return
        carried: tuple[Any, Any] | None = None
        if self._ranks is not None:
            policy = self.call_all("state_dict")
            critic = self.call_all(CRITIC_PREFIX + "state_dict") if self._critic_config is not None else None
            carried = (policy, critic)
            self.shutdown()
            self.moves += 1
        self.devices = devices
        self._form([self._placement(d) for d in devices])
        if carried is not None:
            self.call_all("load_state_dict", carried[0])
            if carried[1] is not None:
                self.call_all(CRITIC_PREFIX + "load_state_dict", carried[1])

    def seen(self) -> list[dict[str, Any]]:
        """What each rank's process was given (:func:`devices_seen`), rank by rank."""
        self._live_ranks()
        return list(self._seen)

    @property
    def world(self) -> int:
        return len(self._live_ranks())

    def _gather(self, refs: list[Any]) -> list[Any]:
        """Every rank's answer; a rank's death is raised as soon as it is known (the others
        would wait in the collective until ``COLLECTIVE_TIMEOUT_S``)."""
        try:
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready[0])
            return list(ray.get(refs))
        except RayActorError as exc:
            raise WorkerLostError(f"a trainer rank's process died ({type(exc).__name__})") from exc
        except RayTaskError as exc:
            # A peer's death reaches the survivors first as a broken connection inside the
            # collective, often before Ray reports the dead process: that is the loss to raise.
            if _a_rank_died(refs):
                raise WorkerLostError("a trainer rank's process died (its peers lost the collective)") from exc
            raise

    def call_all(self, method: str, *args: Any) -> Any:
        """``method`` on every rank at once (a collective); rank 0's answer."""
        shared = [ray.put(a) for a in args]  # serialised once, read by every rank
        return self._gather([rank.call.remote(method, *shared) for rank in self._live_ranks()])[0]

    def pin(self, cores: tuple[int, ...]) -> None:
        """Rank ``r`` on core ``cores[r]`` (round robin when the node has fewer cores than ranks)."""
        if cores:
            self._gather([rank.pin.remote((cores[r % len(cores)],)) for r, rank in enumerate(self._live_ranks())])

    def old_log_probs(self, batch: TokenBatch) -> torch.Tensor:
        result: torch.Tensor = self.call_all("old_log_probs", batch)
        return result

    def ref_log_probs(self, batch: TokenBatch) -> torch.Tensor | None:
        result: torch.Tensor | None = self.call_all("ref_log_probs", batch)
        return result

    def optimizer_step(self, *inputs: Any) -> dict[str, float]:
        """:meth:`PolicyTrainer.optimizer_step` on every rank (each runs its share of the micro-batches)."""
        result: dict[str, float] = self.call_all("optimizer_step", *inputs)
        return result

    def plan_updates(self, batch_size: int, *, seed: int) -> list[torch.Tensor]:
        return plan_updates(self.config, batch_size, seed=seed)

    def weights(self) -> dict[str, torch.Tensor]:
        result: dict[str, torch.Tensor] = self.call_all("weights")
        return result

    def state_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = self.call_all("state_dict")
        return result

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.call_all("load_state_dict", state)

    def shutdown(self) -> None:
        ranks, self._ranks = self._ranks or [], None
        for rank in ranks:
            ray.kill(rank)


class CriticGroup:
    """Implements :class:`~jigsaw_engine.train.critic.ValueTrainer` on a :class:`TrainerGroup`'s
    ranks: each holds a slice of the critic beside its slice of the policy."""

    def __init__(self, group: TrainerGroup, config: CriticConfig) -> None:
        self._group, self.config = group, config

    def values(self, batch: TokenBatch) -> torch.Tensor:
        result: torch.Tensor = self._group.call_all(CRITIC_PREFIX + "values", batch)
        return result

    def update(self, batch: TokenBatch, returns: torch.Tensor, old_values: torch.Tensor) -> dict[str, float]:
        result: dict[str, float] = self._group.call_all(CRITIC_PREFIX + "update", batch, returns, old_values)
        return result

    def state_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = self._group.call_all(CRITIC_PREFIX + "state_dict")
        return result

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._group.call_all(CRITIC_PREFIX + "load_state_dict", state)


def _a_rank_died(refs: list[Any]) -> bool:
    """Whether any rank's call ended because its process died (waiting up to
    :data:`PEER_DEATH_WAIT_S` for Ray to tell)."""
    deadline = time.monotonic() + PEER_DEATH_WAIT_S
    for ref in refs:
        try:
            ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
        except RayActorError:
            return True
        except (RayTaskError, GetTimeoutError):
            continue
    return False
