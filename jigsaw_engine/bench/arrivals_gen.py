"""A day of RL jobs arriving at a multi-tenant cluster, drawn at a chosen offered load.

The shapes follow published characterisations of shared GPU clusters; the numbers are this
generator's own parameters, set to reproduce those shapes at a small scale:

- Daily cycle. Helios (Hu et al., SC'21: SenseTime, four clusters, about 3.4 million jobs over
  six months of 2020) and Alibaba PAI (Weng et al., NSDI'22: about 6,700 GPUs, two months of
  2020) both report submissions that follow the working day: many in the afternoon, few before
  dawn. Arrivals here are a Poisson process whose rate is a cosine over the day, peaking at
  :data:`PEAK_HOUR` with a peak-to-trough ratio of :data:`PEAK_TO_TROUGH`.
- Sizes. Philly (Jeon et al., ATC'19) and Helios both find most jobs ask for few GPUs, with a
  minority of 8 GPUs or more holding most of the GPU time. :data:`GPU_REQUEST_WEIGHTS` puts most
  jobs at 1-4 GPUs and a fifth at 8 or more (never below the model's tensor-parallel degree).
- Durations. All three traces report heavy-tailed run times: a median of minutes to an hour
  against a mean of hours. A job's length alone on its GPUs is lognormal (median
  :data:`MEDIAN_RUN_FRACTION` of the day, sigma :data:`RUN_SIGMA`), capped at
  :data:`MAX_RUN_FRACTION` of the day, and turned into a step count with the job's step time.
- Tenants. Helios splits its clusters into virtual clusters per team, and PAI finds a few users
  submit most of the work. 3-5 tenants with unequal weights; each tenant's guarantee is its
  weight's share of :data:`GUARANTEED_SHARE` of the cluster, it may borrow up to
  :data:`BORROW_SHARE` of the cluster beyond it, and submits work in proportion to its weight.

Offered load is the GPU-time the day's jobs ask for (GPUs x their run time alone) over the
cluster's GPU-time in the day; jobs are drawn until it reaches the target. ``day_s`` shortens
the day (the cycle and the run times scale with it) so that a day simulates in seconds.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from jigsaw_engine.bench.arrivals_file import Tenant, arrivals_document
from jigsaw_engine.bench.mixes import RESPONSES_PER_PROMPT
from jigsaw_engine.bench.mixes import _rollout_tp as rollout_tp
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.dedicated import DedicatedScheduler
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec

PEAK_HOUR = 15.0
PEAK_TO_TROUGH = 3.0
GPU_REQUEST_WEIGHTS = {1: 0.30, 2: 0.20, 4: 0.30, 8: 0.15, 16: 0.05}
MEDIAN_RUN_FRACTION = 1.0 / 12.0
RUN_SIGMA = 1.0
MAX_RUN_FRACTION = 1.0 / 4.0
MIN_STEPS = 2
GUARANTEED_SHARE = 0.75
BORROW_SHARE = 0.5
HIGH_PRIORITY_SHARE = 0.1
"""Share of jobs submitted at priority 2 (the rest at 1)."""
MODELS = {
    "qwen3-0.6b": 1.0,
    "qwen2.5-1.5b": 2.0,
    "qwen2.5-3b": 2.0,
    "qwen3-4b": 2.0,
    "qwen2.5-7b": 3.0,
    "llama-3.1-8b": 2.0,
    "qwen2.5-14b": 1.0,
    "qwen2.5-32b": 0.5,
}
"""Catalogue models and how often each is trained: small and mid-sized models most."""
WORKLOADS = {"gsm8k": 2.0, "math": 3.0, "search": 2.0, "code_tool": 1.0, "aime_refine": 1.0}
TENANT_NAMES = ("research", "product", "agents", "vision", "infra")
TENANT_WEIGHTS = (3.0, 2.0, 2.0, 1.0, 1.0)
STEP_PROBE_STEPS = 2


@dataclass(frozen=True, slots=True)
class ArrivalsConfig:
    num_nodes: int = 4
    devices_per_node: int = 8
    device_type: str = "h100"
    day_s: float = 1800.0
    """The day's length: a real day is 86,400 s; shorter ones scale the cycle and the run times."""
    load: float = 0.8
    tenants: int = 4
    seed: int = 0
    prompts_per_step: int = 16
    max_response_tokens: int = 4096
    """Shortened steps (the built-in mixes take 64 prompts and 8,192 tokens): a day simulates in
    seconds; the schedulers see the same shape of work, in smaller pieces."""


def arrival_rate_shape(t_s: float, day_s: float) -> float:
    """The daily cycle's relative rate at ``t_s`` (its mean over the day is 1)."""
    amplitude = (PEAK_TO_TROUGH - 1.0) / (PEAK_TO_TROUGH + 1.0)
    phase = 2.0 * math.pi * (t_s / day_s - PEAK_HOUR / 24.0)
    return 1.0 + amplitude * math.cos(phase)


def _arrival_time(rng: random.Random, day_s: float) -> float:
    """One arrival drawn from the daily cycle (rejection against its peak)."""
    peak = arrival_rate_shape(PEAK_HOUR / 24.0 * day_s, day_s)
    while True:
        t = rng.uniform(0.0, day_s)
        if rng.uniform(0.0, peak) <= arrival_rate_shape(t, day_s):
            return t


def _weighted(rng: random.Random, weights: dict[Any, float]) -> Any:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def _floor_pow2(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def _tenants(config: ArrivalsConfig, num_devices: int) -> list[Tenant]:
    if not 3 <= config.tenants <= len(TENANT_NAMES):
        raise ValueError(f"tenants must be 3-{len(TENANT_NAMES)}, got {config.tenants}")
    weights = TENANT_WEIGHTS[: config.tenants]
    guaranteed = GUARANTEED_SHARE * num_devices
    return [
        Tenant(name, int(guaranteed * w / sum(weights)), int(BORROW_SHARE * num_devices), w)
        for name, w in zip(TENANT_NAMES, weights, strict=False)
    ]


@dataclass(frozen=True, slots=True)
class _Job:
    model: str
    workload: str
    gpus: int
    tp: int


def _pipeline(config: ArrivalsConfig, name: str, job: _Job, steps: int, seed: int, priority: float) -> dict[str, Any]:
    return {
        "name": name,
        "algorithm": "grpo",
        "model": job.model,
        "workload": job.workload,
        "data": {"train_batch_size": config.prompts_per_step},
        "rollout": {"n": RESPONSES_PER_PROMPT, "max_response_length": config.max_response_tokens},
        "resources": {"num_gpus": job.gpus, "tp": job.tp},
        "trainer": {"total_steps": steps},
        "priority": priority,
        "seed": seed,
    }


class StepTimes:
    """A job's seconds per step alone on its GPUs, simulated once per kind of job."""

    def __init__(self, config: ArrivalsConfig, cluster: ClusterSpec) -> None:
        self._config, self._cluster = config, cluster
        self._cost = RooflineCostModel(load_device_profile(cluster.device_type))
        self._known: dict[_Job, float] = {}

    def __call__(self, job: _Job) -> float:
        if job not in self._known:
            spec = parse_pipeline_spec(_pipeline(self._config, "probe", job, STEP_PROBE_STEPS, 1, 1.0))
            controller = ClusterController(self._cluster, self._cost, scheduler=DedicatedScheduler())
            controller.submit("probe", spec)
            self._known[job] = controller.run_until_idle() / STEP_PROBE_STEPS
        return self._known[job]


def generate_arrivals(config: ArrivalsConfig) -> dict[str, Any]:
    """An arrivals document (:mod:`~jigsaw_engine.bench.arrivals_file`) drawn from ``config.seed``."""
    if not 0.0 < config.load <= 2.0:
        raise ValueError(f"load must be in (0, 2], got {config.load}")
    cluster = ClusterSpec(config.num_nodes, config.devices_per_node, config.device_type)
    rng = random.Random(f"jigsaw-arrivals-{config.seed}")
    step_s = StepTimes(config, cluster)
    memory_bytes = load_device_profile(cluster.device_type).memory_bytes
    tenants = _tenants(config, cluster.num_devices)
    tenant_weights = {t.name: t.weight for t in tenants}
    # A job never asks for more than its tenant may hold (nor than a power of two in it).
    ceiling = {t.name: _floor_pow2(min(cluster.num_devices, t.guarantee_gpus + t.borrow_limit_gpus)) for t in tenants}
    target = config.load * cluster.num_devices * config.day_s
    offered = 0.0
    drawn: list[tuple[str, dict[str, Any]]] = []
    while offered < target:
        tenant = _weighted(rng, tenant_weights)
        model, workload = _weighted(rng, MODELS), _weighted(rng, WORKLOADS)
        tp = rollout_tp(model, memory_bytes)
        gpus = min(max(_weighted(rng, GPU_REQUEST_WEIGHTS), tp), ceiling[tenant])
        run_s = min(
            config.day_s * MEDIAN_RUN_FRACTION * math.exp(rng.gauss(0.0, RUN_SIGMA)),
            config.day_s * MAX_RUN_FRACTION,
        )
        job = _Job(model, workload, gpus, tp)
        steps = max(MIN_STEPS, round(run_s / step_s(job)))
        offered += gpus * steps * step_s(job)
        priority = 2.0 if rng.random() < HIGH_PRIORITY_SHARE else 1.0
        index = len(drawn)
        drawn.append((tenant, _pipeline(config, f"{workload}-{model}-{index}", job, steps, index + 1, priority)))
    times = sorted(_arrival_time(rng, config.day_s) for _ in drawn)
    source = {
        "generator": "jigsaw_engine.bench.arrivals_gen",
        "seed": config.seed,
        "target_load": config.load,
        "offered_load": round(offered / (cluster.num_devices * config.day_s), 4),
    }
    jobs = [(tenant, t, spec) for (tenant, spec), t in zip(drawn, times, strict=True)]
    return arrivals_document(cluster, config.day_s, tenants, jobs, source)
