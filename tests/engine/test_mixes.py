"""The benchmark mixes, built-in and drawn: they parse, fill their cluster exactly and fit on their devices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jigsaw_engine.bench.mixes import (
    MAX_RESPONSE_TOKENS,
    MIXES,
    build_long_mix,
    build_mix,
    build_random_mix,
    long_mix_document,
    random_mix_document,
)
from jigsaw_engine.errors import SpecError
from jigsaw_engine.spec.pipeline import Algorithm, SyncMode, parse_pipeline_spec
from jigsaw_engine.spec.workload_file import WorkloadFile
from tests.engine.builders import make_cost

ALL_VARIANTS = [(name, variant) for name, mix in MIXES.items() for variant in mix.variants]


@pytest.mark.parametrize(("name", "variant"), ALL_VARIANTS)
def test_mix_uses_the_whole_cluster_and_every_pipeline_fits(name: str, variant: str) -> None:
    workload = build_mix(name, variant=variant)
    specs = [parse_pipeline_spec(p) for p in workload.pipelines]
    assert sum(s.resources.num_gpus for s in specs) == workload.cluster.num_devices
    cost = make_cost(workload.cluster.device_type)
    for s in specs:
        assert s.resources.num_gpus % s.resources.tp == 0
        assert cost.kv_capacity_tokens(s.model, tp=s.resources.tp) > 0, s.name
        assert s.algorithm is Algorithm.GRPO
        assert (s.train_batch_size, s.rollout.n, s.rollout.max_response_length) == (64, 4, MAX_RESPONSE_TOKENS)
    assert len({s.seed for s in specs}) == len(specs)
    assert len({s.name for s in specs}) == len(specs)


@pytest.mark.parametrize(
    ("name", "variant", "cluster", "expected"),
    [
        # 8 x H100 split by parameters (4.0 / 0.6 / 14.8 / 8.0 B of 27.4 B): shares 1.2 / 0.2 /
        # 4.3 / 2.3 -> floor powers of two 1 / 1 (its minimum) / 4 / 2 = 8.
        (
            "M0",
            None,
            (8, "h100"),
            [
                ("gsm8k", "qwen3-4b", 1),
                ("math", "qwen3-0.6b", 1),
                ("aime_refine", "deepseek-r1-distill-qwen-14b", 4),
                ("search", "llama-3.1-8b", 2),
            ],
        ),
        # 64 x A100 adds Qwen3-32B (65.6 GB of weights: tp 2 on 80 GB) and takes 32 of 64 devices.
        (
            "M0",
            "64xa100",
            (64, "a100"),
            [
                ("gsm8k", "qwen3-4b", 4),
                ("math", "qwen3-0.6b", 4),
                ("aime_refine", "deepseek-r1-distill-qwen-14b", 16),
                ("search", "llama-3.1-8b", 8),
                ("math", "qwen3-32b", 32),
            ],
        ),
        ("M1", None, (8, "h100"), [("math", "qwen2.5-7b", 2)] * 4),
        # 16 x H100, shares 6.1 / 2.5 / 6.1 / 1.2: floors 4 / 2 / 4 / 1 leave 5 devices; the first
        # 7B doubles to 8, then only the 1.5B can still double (1 device left).
        (
            "M2",
            None,
            (16, "h100"),
            [
                ("math", "qwen2.5-7b", 8),
                ("search", "qwen2.5-3b", 2),
                ("code_tool", "qwen2.5-7b", 4),
                ("gsm8k", "qwen2.5-1.5b", 2),
            ],
        ),
        (
            "M3",
            None,
            (4, "a100"),
            [("search", "qwen2.5-3b", 2), ("gsm8k", "qwen2.5-1.5b", 1), ("math", "qwen2.5-1.5b", 1)],
        ),
        (
            "M4",
            None,
            (64, "h100"),
            [("math", "qwen2.5-32b", 16)] * 2
            + [("code_tool", "qwen2.5-14b", 8)] * 2
            + [("search", "qwen2.5-7b", 4)] * 4,
        ),
    ],
)
def test_mix_contents_follow_the_benchmarks_table(
    name: str, variant: str | None, cluster: tuple[int, str], expected: list[tuple[str, str, int]]
) -> None:
    workload = build_mix(name, variant=variant)
    assert (workload.cluster.num_devices, workload.cluster.device_type) == cluster
    got = [(p["workload"], p["model"], p["resources"]["num_gpus"]) for p in workload.pipelines]
    assert got == expected


def test_a100_variants_have_four_devices_per_node() -> None:
    for variant in ("16xa100", "32xa100", "64xa100"):
        assert build_mix("M0", variant=variant).cluster.devices_per_node == 4


def test_32b_models_get_tensor_parallel_two() -> None:
    tps = {p["model"]: p["resources"]["tp"] for p in build_mix("M4").pipelines}
    assert tps == {"qwen2.5-32b": 2, "qwen2.5-14b": 1, "qwen2.5-7b": 1}


@pytest.mark.parametrize(("variant", "staleness"), [(None, 1), ("streamrl", 1), ("areal", 4)])
def test_m5_is_m2_with_every_pipeline_async(variant: str | None, staleness: int) -> None:
    m2 = build_mix("M2").pipelines
    m5 = build_mix("M5", variant=variant).pipelines
    specs = [parse_pipeline_spec(p) for p in m5]
    assert all(s.mode is SyncMode.ASYNC and s.staleness == staleness for s in specs)
    strip = ("mode", "staleness")
    assert [{k: v for k, v in p.items() if k not in strip} for p in m5] == m2
    assert all(parse_pipeline_spec(p).mode is SyncMode.SYNC for p in m2)


def test_unknown_mix_names_the_field_and_the_known_mixes() -> None:
    with pytest.raises(SpecError) as info:
        build_mix("M9")
    (error,) = info.value.errors
    assert error.field == "mix"
    assert "'M9'" in error.message
    assert "M0, M1, M2, M3, M4, M5" in error.message


def test_unknown_variant_lists_the_known_variants() -> None:
    with pytest.raises(SpecError) as info:
        build_mix("M0", variant="128xa100")
    (error,) = info.value.errors
    assert error.field == "variant"
    assert "8xh100, 16xa100, 32xa100, 64xa100" in error.message


@pytest.mark.parametrize(
    ("document", "build", "sizes"),
    [(random_mix_document, build_random_mix, range(1, 7)), (long_mix_document, build_long_mix, range(2, 5))],
)
def test_drawn_mixes_are_reproducible_and_valid(
    document: Callable[[int], dict[str, Any]], build: Callable[[int], WorkloadFile], sizes: range
) -> None:
    assert document(7) == document(7)
    assert document(7) != document(8)
    for seed in range(10):
        workload = build(seed)  # parses: every pipeline fits its cluster
        assert len(workload.pipelines) in sizes
        assert sum(p["resources"]["num_gpus"] for p in workload.pipelines) == workload.cluster.num_devices


def test_long_response_mixes_are_synchronous_math_and_aime_with_long_responses() -> None:
    for seed in range(10):
        for raw in build_long_mix(seed).pipelines:
            spec = parse_pipeline_spec(raw)
            assert spec.workload.name in ("math", "aime_refine") and spec.mode is SyncMode.SYNC
            assert (spec.rollout.n, spec.rollout.max_response_length) == (8, 16384)
