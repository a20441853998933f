"""The benchmark workload mixes M0-M5 and MT (``docs/benchmarks.md``, "Workload mixes"), as workload files.

Every mix is written in the same mapping format a user submits (``cluster`` plus a list of
pipeline specs) and goes through :func:`~jigsaw_engine.spec.workload_file.parse_workload`, so a
mix can never drift from what the parser accepts. All pipelines run GRPO with 64 prompts x 4
responses and an 8192-token response cap (the long-response mixes: x 8 and 16,384); pipeline
``i`` of a mix gets seed ``i + 1``.

Resources are chosen the way a user of a dedicated partition would choose them:

* ``tp`` is the smallest power of two at which the bf16 weights take at most half of the
  worker's memory (``2 * N <= TP_WEIGHT_SHARE * tp * memory_bytes``), leaving the other half for
  a useful KV pool (verl's sizing advice asks for the weights to fit; the half is so a worker
  can hold a full batch of long responses). On 80 GB devices: up to 14B -> tp 1, 32B -> tp 2.
* ``num_gpus`` splits the cluster roughly in proportion to parameter count: each pipeline
  starts at the largest power of two not above its proportional share (and never below its
  ``tp``), then the devices left over are handed out by doubling the most under-served
  pipeline (lowest ``num_gpus / share``; the earlier pipeline on a tie) that still fits, until
  every device is used. Powers of two keep ``tp`` dividing ``num_gpus`` and match how
  data-parallel rollout workers are laid out in practice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.models import MODEL_CATALOGUE
from jigsaw_engine.spec.workload_file import WorkloadFile, parse_workload

PROMPTS_PER_STEP = 64
RESPONSES_PER_PROMPT = 4
MAX_RESPONSE_TOKENS = 8192
TP_WEIGHT_SHARE = 0.5
"""Largest share of a rollout worker's memory the bf16 weights may take; the rest is KV pool."""


@dataclass(frozen=True, slots=True)
class PipelineTemplate:
    workload: str
    """Key of :data:`~jigsaw_engine.spec.workloads.WORKLOADS`."""
    model: str
    """Key of :data:`~jigsaw_engine.spec.models.MODEL_CATALOGUE`."""


@dataclass(frozen=True, slots=True)
class MixVariant:
    num_nodes: int
    devices_per_node: int
    device_type: str
    pipelines: tuple[PipelineTemplate, ...]
    staleness: int = 0
    """0: synchronous pipelines; k >= 1: every pipeline async with at most k versions of lag."""

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node


@dataclass(frozen=True, slots=True)
class Mix:
    title: str
    variants: dict[str, MixVariant]
    default_variant: str


def _p(workload: str, model: str) -> PipelineTemplate:
    return PipelineTemplate(workload, model)


_M0 = (
    _p("gsm8k", "qwen3-4b"),  # GSM8K Qwen3-4B-Instruct
    _p("math", "qwen3-0.6b"),  # MATH Qwen3-0.6B
    _p("aime_refine", "deepseek-r1-distill-qwen-14b"),  # AIME self-refine R1-Distill-Qwen-14B
    _p("search", "llama-3.1-8b"),  # HotpotQA retrieval Llama-3.1-8B
)
_M2 = (
    _p("math", "qwen2.5-7b"),
    _p("search", "qwen2.5-3b"),
    _p("code_tool", "qwen2.5-7b"),
    _p("gsm8k", "qwen2.5-1.5b"),
)

MIXES: dict[str, Mix] = {
    "M0": Mix(
        "paper-aligned",
        {
            "8xh100": MixVariant(1, 8, "h100", _M0),
            "16xa100": MixVariant(4, 4, "a100", _M0),
            "32xa100": MixVariant(8, 4, "a100", _M0),
            "64xa100": MixVariant(16, 4, "a100", (*_M0, _p("math", "qwen3-32b"))),
        },
        "8xh100",
    ),
    "M1": Mix(
        "many branches of one base",
        {"8xh100": MixVariant(1, 8, "h100", (_p("math", "qwen2.5-7b"),) * 4)},
        "8xh100",
    ),
    "M2": Mix("heterogeneous agentic", {"16xh100": MixVariant(2, 8, "h100", _M2)}, "16xh100"),
    "M3": Mix(
        "small",
        {
            "4xa100": MixVariant(
                1,
                4,
                "a100",
                (_p("search", "qwen2.5-3b"), _p("gsm8k", "qwen2.5-1.5b"), _p("math", "qwen2.5-1.5b")),
            )
        },
        "4xa100",
    ),
    "M4": Mix(
        "large",
        {
            "64xh100": MixVariant(
                8,
                8,
                "h100",
                (_p("math", "qwen2.5-32b"),) * 2
                + (_p("code_tool", "qwen2.5-14b"),) * 2
                + (_p("search", "qwen2.5-7b"),) * 4,
            )
        },
        "64xh100",
    ),
    "M5": Mix(
        "async (M2's pipelines)",
        {
            "streamrl": MixVariant(2, 8, "h100", _M2, staleness=1),
            "areal": MixVariant(2, 8, "h100", _M2, staleness=4),
        },
        "streamrl",
    ),
    "MT": Mix(
        "the real traces replayed (data/traces)",
        {
            "32xh100": MixVariant(
                4,
                8,
                "h100",
                (
                    _p("math_trace", "qwen2.5-32b"),  # DAPO Qwen2.5-32B
                    _p("code_trace", "deepseek-r1-distill-qwen-14b"),  # DeepCoder-14B
                    _p("search_trace", "qwen2.5-7b"),  # Search-R1 Qwen2.5-7B
                    _p("gsm8k", "qwen2.5-1.5b"),
                ),
            )
        },
        "32xh100",
    ),
}


def build_mix(name: str, *, variant: str | None = None) -> WorkloadFile:
    """The mix as a parsed workload file; raise :class:`SpecError` for an unknown name."""
    return parse_workload(mix_document(name, variant=variant))


def mix_document(name: str, *, variant: str | None = None) -> dict[str, Any]:
    """The mix as the mapping a user would write (``cluster`` and ``pipelines``)."""
    mix = MIXES.get(name.upper())
    if mix is None:
        raise SpecError([FieldError("mix", f"unknown mix {name!r}; known mixes: {', '.join(MIXES)}")])
    key = mix.default_variant if variant is None else variant.lower()
    v = mix.variants.get(key)
    if v is None:
        known = ", ".join(mix.variants)
        raise SpecError([FieldError("variant", f"unknown variant {variant!r} of {name}; known variants: {known}")])
    memory_bytes = load_device_profile(v.device_type).memory_bytes
    tps = [_rollout_tp(p.model, memory_bytes) for p in v.pipelines]
    gpus = _split_devices(v.num_devices, [MODEL_CATALOGUE[p.model].num_params for p in v.pipelines], tps)
    return {
        "cluster": {"num_nodes": v.num_nodes, "devices_per_node": v.devices_per_node, "device_type": v.device_type},
        "pipelines": [
            _pipeline(i, p, num_gpus=g, tp=tp, staleness=v.staleness)
            for i, (p, g, tp) in enumerate(zip(v.pipelines, gpus, tps, strict=True))
        ],
    }


def _pipeline(
    index: int,
    p: PipelineTemplate,
    *,
    num_gpus: int,
    tp: int,
    staleness: int,
    responses: int = RESPONSES_PER_PROMPT,
    max_response: int = MAX_RESPONSE_TOKENS,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": f"{p.workload}-{p.model}-{index}",
        "algorithm": "grpo",
        "model": p.model,
        "workload": p.workload,
        "data": {"train_batch_size": PROMPTS_PER_STEP},
        "rollout": {"n": responses, "max_response_length": max_response},
        "resources": {"num_gpus": num_gpus, "tp": tp},
        "seed": index + 1,
    }
    if staleness:
        spec["mode"] = "async"
        spec["staleness"] = staleness
    return spec


def _rollout_tp(model: str, memory_bytes: float) -> int:
    weight_bytes = MODEL_CATALOGUE[model].weight_bytes_bf16
    tp = 1
    while weight_bytes > TP_WEIGHT_SHARE * tp * memory_bytes:
        tp *= 2
    return tp


def _split_devices(total: int, params: list[float], minimums: list[int]) -> list[int]:
    """Powers of two, each >= its minimum, summing to ``total``, close to ``params``' shares."""
    share = [total * n / sum(params) for n in params]
    alloc = [max(m, _floor_pow2(s)) for m, s in zip(minimums, share, strict=True)]
    # Too many already (minimums above their share): halve the most over-served that can give.
    while sum(alloc) > total:
        shrinkable = [i for i, a in enumerate(alloc) if a > minimums[i]]
        if not shrinkable:
            raise ValueError(f"{total} devices cannot hold these pipelines' minimums {minimums}")
        i = max(shrinkable, key=lambda j: alloc[j] / share[j])
        alloc[i] //= 2
    # Hand out the rest: double the most under-served pipeline whose doubling still fits.
    while (left := total - sum(alloc)) > 0:
        growable = [i for i, a in enumerate(alloc) if a <= left]
        if not growable:
            raise ValueError(f"cannot split {total} devices into powers of two for shares {share}")
        i = min(growable, key=lambda j: alloc[j] / share[j])
        alloc[i] *= 2
    return alloc


def _floor_pow2(x: float) -> int:
    p = 1
    while p * 2 <= x:
        p *= 2
    return p


RANDOM_CLUSTERS = ((1, 8, "h100"), (2, 8, "h100"), (1, 4, "a100"), (2, 4, "a100"), (4, 8, "h100"))
RANDOM_MODELS = ("qwen3-0.6b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen3-4b", "qwen2.5-7b", "llama-3.1-8b", "qwen2.5-14b")
RANDOM_WORKLOADS = ("gsm8k", "math", "search", "code_tool", "aime_refine")


def random_mix_document(seed: int) -> dict[str, Any]:
    """A mix drawn from ``seed`` (``jigsaw bench --random N`` uses seeds 0..N-1): a cluster, 2-6
    pipelines of catalogue models on built-in workloads, sometimes all async, sized by the same
    rules as M0-M5; a draw that cannot be sized drops its largest model and tries again."""
    rng = random.Random(f"jigsaw-random-mix-{seed}")
    nodes, per_node, device = rng.choice(RANDOM_CLUSTERS)
    total = nodes * per_node
    count = rng.randint(2, min(6, total))
    templates = [_p(rng.choice(RANDOM_WORKLOADS), rng.choice(RANDOM_MODELS)) for _ in range(count)]
    staleness = rng.choice((0, 0, 1, 4))
    memory_bytes = load_device_profile(device).memory_bytes
    while True:
        tps = [_rollout_tp(p.model, memory_bytes) for p in templates]
        try:
            gpus = _split_devices(total, [MODEL_CATALOGUE[p.model].num_params for p in templates], tps)
            break
        except ValueError:
            largest = max(range(len(templates)), key=lambda i: MODEL_CATALOGUE[templates[i].model].num_params)
            templates.pop(largest)
    return {
        "cluster": {"num_nodes": nodes, "devices_per_node": per_node, "device_type": device},
        "pipelines": [
            _pipeline(i, p, num_gpus=g, tp=tp, staleness=staleness)
            for i, (p, g, tp) in enumerate(zip(templates, gpus, tps, strict=True))
        ],
    }


def build_random_mix(seed: int) -> WorkloadFile:
    return parse_workload(random_mix_document(seed))


LONG_CLUSTERS = ((1, 8, "h100"), (2, 8, "h100"))
LONG_WORKLOADS = ("math", "aime_refine")
LONG_RESPONSES_PER_PROMPT = 8
LONG_MAX_RESPONSE_TOKENS = 16384


def long_mix_document(seed: int) -> dict[str, Any]:
    """A long-response mix drawn from ``seed`` (``jigsaw bench --long N`` uses seeds 0..N-1):
    2-4 synchronous math and AIME self-refine pipelines of catalogue models, 8 responses per
    prompt up to 16,384 tokens, on 8 or 16 H100s. Each asks for a power of two (at least its
    ``tp``) by the rules of M0-M5, but in proportion to a drawn share rather than its parameter
    count, as users ask for what they have: a large model on few devices then runs a first
    step longer than the other pipelines' whole runs, and the devices they leave behind are
    where the look-ahead's resize is easiest to misjudge."""
    rng = random.Random(f"jigsaw-long-mix-{seed}")
    nodes, per_node, device = rng.choice(LONG_CLUSTERS)
    total = nodes * per_node
    templates = [_p(rng.choice(LONG_WORKLOADS), rng.choice(RANDOM_MODELS)) for _ in range(rng.randint(2, 4))]
    memory_bytes = load_device_profile(device).memory_bytes
    tps = [_rollout_tp(p.model, memory_bytes) for p in templates]
    gpus = _split_devices(total, [rng.uniform(0.1, 1.0) for _ in templates], tps)
    return {
        "cluster": {"num_nodes": nodes, "devices_per_node": per_node, "device_type": device},
        "pipelines": [
            _pipeline(
                i,
                p,
                num_gpus=g,
                tp=tp,
                staleness=0,
                responses=LONG_RESPONSES_PER_PROMPT,
                max_response=LONG_MAX_RESPONSE_TOKENS,
            )
            for i, (p, g, tp) in enumerate(zip(templates, gpus, tps, strict=True))
        ],
    }


def build_long_mix(seed: int) -> WorkloadFile:
    return parse_workload(long_mix_document(seed))
