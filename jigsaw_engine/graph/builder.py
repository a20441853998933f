"""Building a step's sub-stage graph from its sampled rollouts and the cost model."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import pairwise

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.substage import ResourceClass, SubStage, SubStageGraph, SubStageKind
from jigsaw_engine.graph.tails import Migration, plan_tail_migrations
from jigsaw_engine.spec.pipeline import Algorithm, PipelineSpec, SyncMode
from jigsaw_engine.workload.decode_sim import BUCKET_NAMES, DecodeBuckets, WorkerRollout, simulate_worker
from jigsaw_engine.workload.plans import SequencePlan

TRAIN_STATE_BYTES_PER_PARAM = 16.0
"""bf16 weights and gradients plus fp32 Adam moments and master weights, sharded over the
training devices (FSDP/ZeRO-3)."""


@dataclass(frozen=True, slots=True)
class GraphConfig:
    buckets: DecodeBuckets = field(default_factory=DecodeBuckets)
    train_minibatches: int = 4
    """Optimizer steps per RL step (verl's ``ppo_mini_batch_size`` = batch / 4 by default)."""
    dispatch: str = "round_robin"
    """How prompt groups are dealt to rollout workers: ``round_robin`` (verl) or
    ``longest_first`` (length-aware, as StreamRL: the longest predicted group to the least
    loaded worker; predictions here are the sampled lengths themselves, the best case)."""
    startup_s: float = 0.0
    """Time to load weights and start workers before step 0 (a ``load`` node on all the
    pipeline's devices); 0 leaves it out, as benchmarks of steady-state throughput do."""
    overlap_rollouts: bool = False
    """Continuous generation across steps (AReaL): an async pipeline's worker may begin its
    next step's rollout once this step's is down to its tail; the controller lets the next
    step's prefill start while the tail still decodes."""
    migrate_tails: bool = False
    """Long-tail migration (:mod:`jigsaw_engine.graph.tails`) for async pipelines: workers
    entering their tail hand their unfinished sequences to a worker already in its tail; the
    source's chain ends there and the target's tail is split where they arrive (an edge from
    the source). Async only: there the freed devices start the next step's generation at once.
    A sync pipeline has nothing to put on them until it trains, and the target's longer tail
    delays that training, so it keeps its tails (figures in ``docs/benchmarks.md``)."""
    prefix_cache: bool = True
    """The rollout engine keeps a conversation's KV cache across turns (vLLM and SGLang cache
    prefixes): a turn after a tool call prefills the tool's output only. False for an engine
    that prefills the whole conversation again (the project's torch engine)."""
    interrupt_reprefill: bool = False
    """Interruptible rollouts (AReaL): a weight update lands during each step's generation and
    the in-flight sequences recompute their KV cache; charged as a ``prefill.interrupt`` node
    re-prefilling the worker's mean resident context (what is in flight at a random time)."""
    early_logprobs: bool = False
    """A sync step's log-prob forwards begin before its rollout ends: a worker that finishes
    while another still decodes runs the old- and reference-policy forwards of its own
    sequences on its own devices at once (per-sequence work, so the results are the same;
    the reference weights are loaded from host memory first). Only the worker that finishes
    last leaves its sequences to the forwards on every device of the step. Off with long-tail
    migration (its sequences change workers) and for async pipelines, whose training part
    is not the rollout's."""
    workers_share_process: bool = False
    """A pipeline's rollout workers are threads of one process (the torch engine in a real
    job's actor): what holds the interpreter's lock runs one worker at a time, so each
    worker's rollout is charged the serial share of the others' that overlaps it
    (:attr:`~jigsaw_engine.cost.device.DeviceProfile.rollout_threads_parallel_fraction`).
    False where each worker has a process of its own (vLLM engines, rollout worker actors)
    and in the simulator's GPU clusters."""


def split_by_worker(
    spec: PipelineSpec, plans: list[SequencePlan], dispatch: str = "round_robin"
) -> list[list[SequencePlan]]:
    """Deal whole prompt groups to the rollout workers (see :attr:`GraphConfig.dispatch`)."""
    dp, n = spec.resources.dp, spec.rollout.n
    groups = [plans[g * n : (g + 1) * n] for g in range(len(plans) // n)]
    per_worker: list[list[SequencePlan]] = [[] for _ in range(dp)]
    if dispatch == "round_robin":
        for g, group in enumerate(groups):
            per_worker[g % dp].extend(group)
        return per_worker
    if dispatch != "longest_first":
        raise ValueError(f"dispatch must be round_robin or longest_first, got {dispatch!r}")
    load = [0] * dp
    for group in sorted(groups, key=lambda grp: -max(p.response_tokens for p in grp)):
        w = min(range(dp), key=lambda i: (load[i], i))
        per_worker[w].extend(group)
        load[w] += sum(p.total_tokens for p in group)
    return per_worker


def build_step_graph(
    cost: RooflineCostModel,
    spec: PipelineSpec,
    plans: list[SequencePlan],
    *,
    pipeline_id: str,
    step: int,
    config: GraphConfig = GraphConfig(),
) -> SubStageGraph:
    tp, gpus, model = spec.resources.tp, spec.resources.train_gpus, spec.model
    nodes: list[SubStage] = []
    edges: list[tuple[str, str]] = []
    rollout_ends: list[str] = []
    load: SubStage | None = None
    if step == 0 and config.startup_s > 0:
        load_mem = model.weight_bytes_bf16 / tp
        load = SubStage(
            "s0/load", SubStageKind.LOAD, 0, None, None, gpus, load_mem, ResourceClass.HOST, config.startup_s
        )
        nodes.append(load)
    per_worker = dict(enumerate(split_by_worker(spec, plans, config.dispatch)))
    rollouts = {
        w: simulate_worker(cost, model, wp, tp=tp, buckets=config.buckets, prefix_cache=config.prefix_cache)
        for w, wp in per_worker.items()
        if wp
    }
    migrations = (
        plan_tail_migrations(
            rollouts,
            max_batch=config.buckets.tail_max_tokens - 1,
            kv_capacity_tokens=cost.kv_capacity_tokens(model, tp=tp),
        )
        if config.migrate_tails and spec.mode is SyncMode.ASYNC
        else []
    )
    incoming: dict[int, list[Migration]] = {}
    for m in migrations:
        incoming.setdefault(m.target, []).append(m)
    for target, moves in incoming.items():
        arrivals = tuple((m.at_s, rollouts[m.source].tail_remaining) for m in moves)
        rollouts[target] = simulate_worker(
            cost,
            model,
            per_worker[target],
            tp=tp,
            buckets=config.buckets,
            arrivals=arrivals,
            prefix_cache=config.prefix_cache,
        )
    chains: dict[int, list[SubStage]] = {}
    for w, rollout in rollouts.items():
        in_flight = rollout.context_token_s / rollout.decode_s if rollout.decode_s > 0 else 0.0
        reprefill_s = cost.prefill_s(model, tokens=in_flight, tp=tp)
        interrupted = config.interrupt_reprefill and spec.mode is SyncMode.ASYNC  # sync: no update mid-rollout
        chains[w] = _worker_chain(
            rollout, spec, step, w, reprefill_s if interrupted else 0.0, overhead_s=cost.device.stage_overhead_s
        )
    if config.workers_share_process:
        chains = _sharing_one_interpreter(chains, cost.device.rollout_threads_parallel_fraction)
    migration_edges: list[tuple[str, str]] = []
    for m in migrations:  # the source stops where it hands its sequences on
        chains[m.source] = _cut_at_tail_entry(chains[m.source], rollouts[m.source])
    for target, moves in incoming.items():
        chains[target], arrival_nodes = _split_tail(chains[target], rollouts[target])
        migration_edges += [
            (chains[m.source][-1].node_id, a.node_id) for m, a in zip(moves, arrival_nodes, strict=True)
        ]
    early = _early_forwards(cost, config, spec, chains, per_worker, step) if not migrations else {}
    forward_ends: list[str] = []
    for w, forwards in early.items():
        rollout_ends.append(chains[w][-1].node_id)
        forward_ends.append(forwards[-1].node_id)
        chains[w] = chains[w] + forwards
    for w, chain in chains.items():
        nodes += chain
        edges += [(a.node_id, b.node_id) for a, b in pairwise(chain)]
        if load is not None:
            edges.append((load.node_id, chain[0].node_id))
        if w not in early:
            rollout_ends.append(chain[-1].node_id)
    edges += migration_edges

    tokens = sum(p.total_tokens for p in plans)
    square = sum(p.total_tokens**2 for p in plans)  # attention grows with each sequence's length squared
    train_mem = TRAIN_STATE_BYTES_PER_PARAM * model.num_params / gpus
    left = [p for w, wp in per_worker.items() if w not in early for p in wp]  # forwards not run early
    forward_s = (
        cost.logprob_forward_s(
            model,
            tokens=sum(p.total_tokens for p in left),
            num_gpus=gpus,
            square_tokens=sum(p.total_tokens**2 for p in left),
        )
        + cost.device.stage_overhead_s
    )
    values_s = cost.logprob_forward_s(model, tokens=tokens, num_gpus=gpus, square_tokens=square)
    actor_update_s = cost.train_s(model, tokens=tokens, num_gpus=gpus, epochs=spec.ppo_epochs, square_tokens=square)
    update_s = actor_update_s + cost.device.stage_overhead_s
    if spec.algorithm is Algorithm.PPO:
        update_s += values_s + cost.device.stage_overhead_s + actor_update_s  # the critic: a values forward, its update

    def stage(
        kind: SubStageKind, duration_s: float, devices: int, resource: ResourceClass, bucket: str | None = None
    ) -> SubStage:
        suffix = f".{bucket}" if bucket else ""
        return SubStage(
            f"s{step}/{kind.value}{suffix}",
            kind,
            step,
            None,
            bucket,
            devices,
            train_mem if devices else 0.0,
            resource,
            duration_s,
            tokens,
            spec.resources.dp,
        )

    tail: list[SubStage] = [
        stage(
            SubStageKind.REWARD,
            cost.device.reward_s_per_sequence * len(plans) + cost.device.stage_overhead_s,
            0,
            ResourceClass.HOST,
        ),
        stage(SubStageKind.OLD_LOGPROB, forward_s, gpus, ResourceClass.COMPUTE),
    ]
    if spec.algorithm in (Algorithm.GRPO, Algorithm.PPO):
        tail.append(stage(SubStageKind.REF_LOGPROB, forward_s, gpus, ResourceClass.COMPUTE))
    k = config.train_minibatches
    tail += [stage(SubStageKind.TRAIN, update_s / k, gpus, ResourceClass.COMPUTE, f"mb{i}") for i in range(k)]
    tail.append(stage(SubStageKind.WEIGHT_SYNC, cost.weight_sync_s(model), gpus, ResourceClass.MEMORY))
    edges += [(end, tail[0].node_id) for end in rollout_ends]
    edges += [(end, tail[1].node_id) for end in forward_ends]  # the step's own forwards wait for them
    edges += [(a.node_id, b.node_id) for a, b in pairwise(tail)]
    nodes += tail
    lag = spec.staleness if spec.mode is SyncMode.ASYNC else 0
    return SubStageGraph(pipeline_id, step, tuple(nodes), tuple(edges), step + lag + 1)


def _is_tail(node: SubStage) -> bool:
    return node.kind is SubStageKind.DECODE and node.bucket == "tail"


def _sharing_one_interpreter(chains: dict[int, list[SubStage]], parallel: float) -> dict[int, list[SubStage]]:
    """Worker chains whose device work is lengthened by the other workers' work that holds
    the same interpreter's lock (``1 - parallel`` of it) while they run: worker ``i`` alone
    takes ``T_i``, beside the others ``T_i + (1 - parallel) * sum_j min(T_j, T_i)``. Two
    equal workers each take ``(2 - parallel) T``: twice ``T`` fully serial, ``T`` fully
    parallel. The workers are taken to start together, as a step's do; tool waits (host
    nodes, replayed as measured) are left as they are."""
    if parallel >= 1.0 or len(chains) < 2:
        return chains
    alone = {w: sum(n.duration_s for n in chain if n.devices > 0) for w, chain in chains.items()}
    out: dict[int, list[SubStage]] = {}
    for w, chain in chains.items():
        if alone[w] <= 0:
            out[w] = chain
            continue
        waits = (1.0 - parallel) * sum(min(t, alone[w]) for v, t in alone.items() if v != w)
        scale = (alone[w] + waits) / alone[w]
        out[w] = [replace(n, duration_s=n.duration_s * scale) if n.devices > 0 else n for n in chain]
    return out


def _early_forwards(
    cost: RooflineCostModel,
    config: GraphConfig,
    spec: PipelineSpec,
    chains: dict[int, list[SubStage]],
    per_worker: dict[int, list[SequencePlan]],
    step: int,
) -> dict[int, list[SubStage]]:
    """The forwards of the workers whose sequences are forwarded as soon as they finish (see
    :attr:`GraphConfig.early_logprobs`): a worker that is not the last to finish and whose
    forwards end before the last one does (they then cost the step no time; longer ones
    would hold its training back)."""
    if not config.early_logprobs or spec.mode is not SyncMode.SYNC or len(chains) < 2:
        return {}
    ends = {w: sum(n.duration_s for n in chain) for w, chain in chains.items()}
    last_end = max(ends.values())
    out: dict[int, list[SubStage]] = {}
    for w in sorted(chains):
        forwards = _worker_forwards(cost, spec, per_worker[w], step, w)
        if ends[w] + sum(n.duration_s for n in forwards) <= last_end:
            out[w] = forwards
    return out


def _worker_forwards(
    cost: RooflineCostModel, spec: PipelineSpec, plans: list[SequencePlan], step: int, worker: int
) -> list[SubStage]:
    """The old-policy (and, for GRPO and PPO, reference) forwards of one worker's sequences on
    its own ``tp`` devices, where its rollout engine holds the current weights; the reference
    weights come from host memory first (charged on the first forward)."""
    tp, model = spec.resources.tp, spec.model
    kinds = [SubStageKind.OLD_LOGPROB]
    if spec.algorithm in (Algorithm.GRPO, Algorithm.PPO):
        kinds.append(SubStageKind.REF_LOGPROB)
    tokens = sum(p.total_tokens for p in plans)
    forward_s = (
        cost.logprob_forward_s(model, tokens=tokens, num_gpus=tp, square_tokens=sum(p.total_tokens**2 for p in plans))
        + cost.device.stage_overhead_s
    )
    load_s = cost.context_switch_s(model, num_gpus=tp, training=False) if len(kinds) > 1 else 0.0
    mem = len(kinds) * model.weight_bytes_bf16 / tp
    return [
        SubStage(
            f"s{step}/w{worker}/{kind.value}",
            kind,
            step,
            worker,
            None,
            tp,
            mem,
            ResourceClass.COMPUTE,
            forward_s + (load_s if i == 0 else 0.0),
            tokens,
            spec.resources.dp,
        )
        for i, kind in enumerate(kinds)
    ]


def _cut_at_tail_entry(chain: list[SubStage], rollout: WorkerRollout) -> list[SubStage]:
    """A source's chain up to its tail entry: the tail and tool waits it had before then."""
    tail_s, tail_tokens, tool_s = rollout.tail_entry_marks
    cut: list[SubStage] = []
    for n in chain:
        if _is_tail(n):
            n = replace(n, duration_s=tail_s, tokens=tail_tokens)
        elif n.kind is SubStageKind.TOOL:
            n = replace(n, duration_s=tool_s)
        if n.duration_s > 0 or not (_is_tail(n) or n.kind is SubStageKind.TOOL):
            cut.append(n)
    return cut


def _split_tail(chain: list[SubStage], rollout: WorkerRollout) -> tuple[list[SubStage], list[SubStage]]:
    """A target's tail cut where migrated sequences arrive: (the chain, the node each arrival
    starts). Durations and tokens come from the target's simulation (``arrival_tail_marks``)."""
    tail = next(n for n in chain if _is_tail(n))
    cuts = [*rollout.arrival_tail_marks, (tail.duration_s, tail.tokens)]
    pieces: list[SubStage] = []
    done_s, done_tokens = 0.0, 0
    for i, (at_s, at_tokens) in enumerate(cuts):
        node_id = tail.node_id if i == 0 else f"{tail.node_id}.m{i}"
        pieces.append(replace(tail, node_id=node_id, duration_s=at_s - done_s, tokens=at_tokens - done_tokens))
        done_s, done_tokens = at_s, at_tokens
    i = chain.index(tail)
    return chain[:i] + pieces + chain[i + 1 :], pieces[1:]


def _worker_chain(
    rollout: WorkerRollout, spec: PipelineSpec, step: int, worker: int, reprefill_s: float = 0.0, *, overhead_s: float
) -> list[SubStage]:
    """prefill (-> prefill.interrupt) -> decode.dense -> decode.medium -> decode.tail (-> tool
    waits), on ``tp`` devices.

    The prefill node also carries the generation stage's launch overhead.

    Iteration classes interleave in multi-turn rollouts; the chain keeps their totals in the
    order a single-turn rollout passes through them.
    """
    tp, model = spec.resources.tp, spec.model
    mem = model.weight_bytes_bf16 / tp + rollout.peak_context_tokens * model.kv_bytes_per_token / tp
    prefix = f"s{step}/w{worker}"
    chain = [
        SubStage(
            f"{prefix}/prefill",
            SubStageKind.PREFILL,
            step,
            worker,
            None,
            tp,
            mem,
            ResourceClass.COMPUTE,
            rollout.prefill_s + overhead_s,
            workers=spec.resources.dp,
        ),
    ]
    if reprefill_s > 0:
        chain.append(
            SubStage(
                f"{prefix}/prefill.interrupt",
                SubStageKind.PREFILL,
                step,
                worker,
                "interrupt",
                tp,
                mem,
                ResourceClass.COMPUTE,
                reprefill_s,
                workers=spec.resources.dp,
            )
        )
    tail_mem = (model.weight_bytes_bf16 + rollout.tail_peak_context_tokens * model.kv_bytes_per_token) / tp
    for bucket in BUCKET_NAMES:
        if rollout.bucket_s[bucket] > 0:
            resource = ResourceClass.COMPUTE if bucket == "dense" else ResourceClass.MEMORY
            chain.append(
                SubStage(
                    f"{prefix}/decode.{bucket}",
                    SubStageKind.DECODE,
                    step,
                    worker,
                    bucket,
                    tp,
                    tail_mem if bucket == "tail" else mem,
                    resource,
                    rollout.bucket_s[bucket],
                    rollout.bucket_tokens[bucket],
                    spec.resources.dp,
                )
            )
    if rollout.tool_wait_s > 0:
        chain.append(
            SubStage(
                f"{prefix}/tool",
                SubStageKind.TOOL,
                step,
                worker,
                None,
                0,
                0.0,
                ResourceClass.HOST,
                rollout.tool_wait_s,
                workers=spec.resources.dp,
            )
        )
    return chain
