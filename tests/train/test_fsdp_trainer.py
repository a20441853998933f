"""The policy trainer, and PPO's critic, across a worker group with FSDP2: two CPU processes
(gloo), each holding half of every parameter, make the same update as one process holding all
of it."""

from __future__ import annotations

import copy
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from jigsaw_engine.rl import metrics as names
from jigsaw_engine.train.critic import CriticConfig, CriticTrainer
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer
from jigsaw_engine.train.token_batch import batch_log_probs
from tests.train.test_micro_batches import long_tailed_batch

pytestmark = pytest.mark.slow

# Micro-batches of at most 5 rows and 150 tokens: 24 long-tailed rows make an odd number of
# them, so one rank runs a weight-0 micro-batch to keep the collectives in step. KL to the
# reference on, so the sharded reference model is exercised too.
CONFIG = ActorConfig(lr=1e-2, micro_batch_size=5, micro_batch_tokens=150, kl_coef=0.1)
CRITIC = CriticConfig(lr=1e-2, micro_batch_size=5, micro_batch_tokens=150)
WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _leave_together() -> None:
    """Every rank done before any tears the group down: a rank whose peer (rank 0 hosts the
    group's store) had already exited was seen to abort in its teardown, once in CI."""
    torch.distributed.barrier()


@contextmanager
def _group(rank: int, world: int, port: int) -> Iterator[None]:
    """This process as rank ``rank`` of a gloo group of ``world``, for the block's duration."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        yield
    finally:
        torch.distributed.destroy_process_group()


def _rank(rank: int, port: int, folder: Path) -> None:
    with _group(rank, WORLD, port):
        from jigsaw_engine.train.fsdp import data_parallel_mesh, full

        inputs = torch.load(folder / "inputs.pt", weights_only=False)
        trainer = PolicyTrainer(inputs["model"], CONFIG, mesh=data_parallel_mesh())
        local = {n: p.to_local().numel() for n, p in trainer.model.named_parameters()}
        batch = inputs["batch"]
        old = trainer.old_log_probs(batch)  # each rank forwards its share of the micro-batches
        metrics = trainer.update(batch, inputs["advantages"], inputs["old"], trainer.ref_log_probs(batch))
        grads = {n: full(p.grad) for n, p in trainer.model.named_parameters() if p.grad is not None}
        weights = trainer.weights()
        if rank == 0:
            torch.save(
                {"metrics": metrics, "grads": grads, "weights": weights, "local": local, "old": old}, folder / "out.pt"
            )
        _leave_together()


def test_a_sharded_update_across_two_processes_equals_the_one_process_update(arith_policy, tmp_path: Path) -> None:
    batch = long_tailed_batch(len(arith_policy.tokenizer), seed=1)
    advantages = torch.randn(batch.response_mask.shape, generator=torch.Generator().manual_seed(0))
    base = arith_policy.fresh_model()
    old = batch_log_probs(base, batch, micro_batch_size=batch.size)
    torch.save({"model": base, "batch": batch, "advantages": advantages, "old": old}, tmp_path / "inputs.pt")

    mp.spawn(_rank, args=(_free_port(), tmp_path), nprocs=WORLD)
    sharded = torch.load(tmp_path / "out.pt", weights_only=False)

    one = PolicyTrainer(copy.deepcopy(base), CONFIG)
    metrics = one.update(batch, advantages, old, one.ref_log_probs(batch))
    grads = {n: p.grad for n, p in one.model.named_parameters() if p.grad is not None}

    # The log-probs forwarded in shares are the one-process log-probs.
    mask = batch.response_mask.bool()
    assert torch.allclose(sharded["old"][mask], old[mask], atol=1e-5)
    # Each process held about half of the parameters, not a copy of all of them.
    total = sum(p.numel() for p in base.parameters())
    assert sum(sharded["local"].values()) <= total // WORLD + 64 * len(sharded["local"])
    assert grads.keys() == sharded["grads"].keys()
    for name, grad in grads.items():
        assert torch.allclose(sharded["grads"][name], grad, rtol=1e-3, atol=1e-6), name
    for name, weight in one.weights().items():
        assert torch.allclose(sharded["weights"][name], weight, atol=1e-5), name
    for key in (names.PG_LOSS, names.ENTROPY, names.KL_LOSS, names.GRAD_NORM):
        assert sharded["metrics"][key] == pytest.approx(metrics[key], rel=1e-4, abs=1e-7), key


def _resume_rank(rank: int, world: int, port: int, folder: Path) -> None:
    """Group of ``world``: from the saved checkpoint, the second update of the policy and of
    PPO's critic; and with two ranks, first the uninterrupted run that wrote the checkpoint."""
    with _group(rank, world, port):
        from jigsaw_engine.train.fsdp import data_parallel_mesh

        inputs = torch.load(folder / "inputs.pt", weights_only=False)
        batch, advantages, old, returns = inputs["batch"], inputs["advantages"], inputs["old"], inputs["returns"]
        out: dict[str, object] = {}
        if not (folder / "checkpoint.pt").exists():
            trainer = PolicyTrainer(copy.deepcopy(inputs["model"]), CONFIG, mesh=data_parallel_mesh())
            critic = CriticTrainer(inputs["model"], CRITIC, mesh=data_parallel_mesh())
            trainer.update(batch, advantages, old, trainer.ref_log_probs(batch), seed=0)
            critic.update(batch, returns, critic.values(batch))
            state = {"policy": trainer.state_dict(), "critic": critic.state_dict()}
            if rank == 0:
                torch.save(state, folder / "checkpoint.pt")
            trainer.update(batch, advantages, old, trainer.ref_log_probs(batch), seed=1)
            critic.update(batch, returns, critic.values(batch))
            out["uninterrupted"] = trainer.weights()
            out["critic uninterrupted"] = critic.state_dict()["model"]
            torch.distributed.barrier()
        # A fresh trainer, built from the start policy as a resumed job is (it is also the KL
        # reference), loads the weights and optimizer state after the first update; so does
        # a fresh critic, built from the start policy too.
        saved = torch.load(folder / "checkpoint.pt", weights_only=False)
        resumed = PolicyTrainer(copy.deepcopy(inputs["model"]), CONFIG, mesh=data_parallel_mesh())
        resumed.load_state_dict(saved["policy"])
        resumed.update(batch, advantages, old, resumed.ref_log_probs(batch), seed=1)
        out["resumed"] = resumed.weights()
        critic = CriticTrainer(inputs["model"], CRITIC, mesh=data_parallel_mesh())
        critic.load_state_dict(saved["critic"])
        critic.update(batch, returns, critic.values(batch))
        out["critic resumed"] = critic.state_dict()["model"]
        if rank == 0:
            torch.save(out, folder / f"resume-{world}.pt")
        _leave_together()


def test_a_sharded_trainer_resumes_from_its_checkpoint_in_a_group_of_any_size(arith_policy, tmp_path: Path) -> None:
    """The checkpoint holds whole tensors and the optimizer's moments by parameter name: a new
    group of two, or of one, picks up where the first left off and makes the same next update,
    the policy's and PPO's critic's alike."""
    batch = long_tailed_batch(len(arith_policy.tokenizer), seed=2)
    advantages = torch.randn(batch.response_mask.shape, generator=torch.Generator().manual_seed(3))
    returns = torch.randn(batch.response_mask.shape, generator=torch.Generator().manual_seed(7))
    base = arith_policy.fresh_model()
    old = batch_log_probs(base, batch, micro_batch_size=batch.size)
    inputs = {"model": base, "batch": batch, "advantages": advantages, "old": old, "returns": returns}
    torch.save(inputs, tmp_path / "inputs.pt")
    mp.spawn(_resume_rank, args=(2, _free_port(), tmp_path), nprocs=2)
    mp.spawn(_resume_rank, args=(1, _free_port(), tmp_path), nprocs=1)
    two, one = (torch.load(tmp_path / f"resume-{n}.pt", weights_only=False) for n in (2, 1))
    moved = max(float((w - base.state_dict()[n]).abs().max()) for n, w in two["uninterrupted"].items())
    assert moved > 1e-3, "the updates must change the weights"
    for name, weight in two["uninterrupted"].items():
        assert torch.allclose(two["resumed"][name], weight, atol=1e-5), name
        assert torch.allclose(one["resumed"][name], weight, atol=1e-5), name
    head = two["critic uninterrupted"]["head.weight"]
    assert float(head.abs().max()) > 1e-3, "the critic's updates must move its zero-initialised head"
    for name, weight in two["critic uninterrupted"].items():
        assert torch.allclose(two["critic resumed"][name], weight, atol=1e-5), name
        assert torch.allclose(one["critic resumed"][name], weight, atol=1e-5), name


def _critic_rank(rank: int, port: int, folder: Path) -> None:
    with _group(rank, WORLD, port):
        from jigsaw_engine.train.fsdp import data_parallel_mesh

        inputs = torch.load(folder / "inputs.pt", weights_only=False)
        critic = CriticTrainer(inputs["model"], CRITIC, mesh=data_parallel_mesh())
        local = sum(p.to_local().numel() for p in critic.critic.parameters())
        out = _value_then_learn(critic, inputs["batch"], inputs["returns"])
        state = critic.state_dict()  # whole tensors (a collective)
        if rank == 0:
            torch.save({**out, "state": state, "local": local}, folder / "out.pt")
        _leave_together()


def _value_then_learn(critic: CriticTrainer, batch, returns: torch.Tensor) -> dict[str, object]:
    """A step's values (the zero head's zeros), one update, then the values it has learned."""
    first = critic.values(batch)
    metrics = critic.update(batch, returns, first)
    return {"metrics": metrics, "values": critic.values(batch)}


def test_a_sharded_critic_across_two_processes_values_and_learns_as_one_process(arith_policy, tmp_path: Path) -> None:
    """PPO's critic lives on the policy's worker group: its values, each rank forwarding its
    share of the micro-batches, and its update, one rank topping up with a weight-0
    micro-batch, are the one-process ones."""
    batch = long_tailed_batch(len(arith_policy.tokenizer), seed=4)
    returns = torch.randn(batch.response_mask.shape, generator=torch.Generator().manual_seed(5))
    base = arith_policy.fresh_model()
    torch.save({"model": base, "batch": batch, "returns": returns}, tmp_path / "inputs.pt")

    mp.spawn(_critic_rank, args=(_free_port(), tmp_path), nprocs=WORLD)
    sharded = torch.load(tmp_path / "out.pt", weights_only=False)

    one = CriticTrainer(copy.deepcopy(base), CRITIC)
    expected = _value_then_learn(one, batch, returns)

    mask = batch.response_mask.bool()
    assert float(expected["values"][mask].abs().mean()) > 1e-3, "one update must move the values off zero"
    assert torch.allclose(sharded["values"][mask], expected["values"][mask], rtol=1e-3, atol=1e-5)
    for key in (names.VF_LOSS, names.VF_CLIPFRAC):
        assert sharded["metrics"][key] == pytest.approx(expected["metrics"][key], rel=1e-4, abs=1e-7), key
    total = sum(p.numel() for p in one.critic.parameters())
    assert sharded["local"] <= total // WORLD + 64 * len(list(one.critic.parameters()))
    for name, weight in one.critic.state_dict().items():
        assert torch.allclose(sharded["state"]["model"][name], weight, atol=1e-5), name
