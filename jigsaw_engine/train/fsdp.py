"""FSDP2 for the policy trainer: one model sharded across a worker group, data-parallel updates.

Each decoder layer, then the whole model, is ``fully_shard``-ed over the group's device mesh:
every rank keeps a slice of each parameter (and of its optimizer state), gathers a layer's
weights for its forward and backward, and reduce-scatters the gradients. The same code runs
on GPUs (NCCL) and, for tests and machines without one, on CPU processes (gloo).

How an update is shared (:meth:`~jigsaw_engine.train.policy_trainer.PolicyTrainer.optimizer_step`):
the mini-batch is cut into micro-batches as on one process, and rank ``r`` of ``w`` takes
micro-batches ``r, r + w, ...``. Each micro-batch's loss keeps its weight in the whole
mini-batch and is scaled by ``w`` (the reduce-scatter averages over ranks), so the summed
gradient is exactly the one-process gradient. Every rank must run as many forwards and
backwards as the others (each is a collective), so a rank short of micro-batches runs one
with weight zero.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor


def data_parallel_mesh(device_type: str = "cpu") -> DeviceMesh:
    """A 1-D mesh over every rank of the initialised process group."""
    return init_device_mesh(device_type, (torch.distributed.get_world_size(),))


def shard_layers(model: torch.nn.Module, mesh: DeviceMesh) -> None:
    """Each decoder layer of a causal LM a unit of its own: gathered only while it runs."""
    for layer in getattr(getattr(model, "model", None), "layers", None) or []:
        fully_shard(layer, mesh=mesh)


def shard_model(model: torch.nn.Module, mesh: DeviceMesh) -> None:
    """Shard ``model`` in place: each decoder layer a unit of its own (gathered only while it
    runs), the embeddings and head with the root."""
    shard_layers(model, mesh)
    fully_shard(model, mesh=mesh)


def full(tensor: Any) -> Any:
    """A sharded tensor gathered whole on every rank (a collective); anything else unchanged."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def sum_over_ranks(values: dict[str, float], mesh: DeviceMesh) -> dict[str, float]:
    keys = sorted(values)
    summed = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=mesh.device_type)
    torch.distributed.all_reduce(summed, group=mesh.get_group())
    return dict(zip(keys, summed.tolist(), strict=True))


WHOLE = StateDictOptions(full_state_dict=True)


def full_state_dict(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Model and optimizer state gathered whole on every rank (a collective)."""
    model_state, optimizer_state = get_state_dict(model, optimizer, options=WHOLE)
    return {"model": model_state, "optimizer": optimizer_state}


def load_full_state_dict(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Each rank keeps its slices of a whole state (from :func:`full_state_dict`, any group size)."""
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"], options=WHOLE
    )
