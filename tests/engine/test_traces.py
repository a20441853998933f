"""Real traces: they load, match their README, back the fitted workloads, and replay deterministically.

Run with ``-s`` to see the tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.traces import (
    Trace,
    TraceReplay,
    TraceSummary,
    load_code_trace,
    load_math_trace,
    load_search_trace,
    summarize,
    to_plan,
    trace_from_plans,
)
from tests.engine.builders import make_spec

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
MATH = TRACES / "math_dapo_qwen2.5-32b.json"
CODE = TRACES / "code_deepcoder_14b.json"
SEARCH = TRACES / "search_r1_multiturn_qwen2.5-7b.json.gz"


@pytest.fixture(scope="module")
def math_trace() -> Trace:
    return load_math_trace(MATH)


@pytest.fixture(scope="module")
def search_trace() -> Trace:
    return load_search_trace(SEARCH)


ROWS: tuple[tuple[str, str, str], ...] = (
    # (label, TraceSummary field, format)
    ("sequences", "num_sequences", "{:.0f}"),
    ("response mean", "response_mean_tokens", "{:.0f}"),
    ("response p50", "response_p50_tokens", "{:.0f}"),
    ("response p90", "response_p90_tokens", "{:.0f}"),
    ("response p99", "response_p99_tokens", "{:.0f}"),
    ("response max", "response_max_tokens", "{:.0f}"),
    ("max / mean", "response_max_over_mean", "{:.1f}"),
    ("group max/mean", "group_max_over_mean", "{:.2f}"),
    ("turns 1..5", "turn_fractions", "{}"),
    ("tokens/turn mean", "turn_mean_tokens", "{:.1f}"),
    ("tokens/turn p50", "turn_p50_tokens", "{:.0f}"),
    ("tool latency mean s", "tool_latency_mean_s", "{:.3f}"),
    ("tool latency p50 s", "tool_latency_p50_s", "{:.3f}"),
    ("tool latency p99 s", "tool_latency_p99_s", "{:.3f}"),
    ("appended tokens/call", "appended_tokens_per_call", "{:.0f}"),
)


def print_table(*summaries: TraceSummary) -> None:
    print()
    print(f"{'':22}" + "".join(f"{s.name:>40}" for s in summaries))
    for label, field, fmt in ROWS:
        cells = []
        for s in summaries:
            value = getattr(s, field)
            text = "/".join(f"{v:.2f}" for v in value) if isinstance(value, tuple) else fmt.format(value)
            cells.append(f"{text:>40}")
        print(f"{label:22}" + "".join(cells))


def within(value: float, expected: float, rel: float) -> bool:
    return abs(value - expected) <= rel * expected


# ---------------------------------------------------------------------------------------------
# (a) the traces load and match what their README says


def test_math_trace_matches_readme(math_trace: Trace) -> None:
    s = summarize(math_trace)
    print_table(s)
    # README: 576 prompts x 8 responses; mean about 581, p99 about 2,700, max about 10,100,
    # within a group the longest about twice the mean.
    assert (s.num_groups, s.num_sequences, math_trace.group_size) == (576, 4608, 8)
    assert within(s.response_mean_tokens, 581, 0.02)
    assert within(s.response_p99_tokens, 2700, 0.05)
    assert within(s.response_max_tokens, 10_100, 0.02)
    assert 1.8 <= s.group_max_over_mean <= 2.5
    assert s.turn_fractions[0] == 1.0 and s.tool_latency_mean_s == 0.0


def test_code_trace_matches_readme() -> None:
    trace = load_code_trace(CODE)
    s = summarize(trace)
    print_table(s)
    # README: 80 prompts x 8, mean about 9,400 tokens, many at the 16k cap.
    assert (s.num_groups, s.num_sequences) == (80, 640)
    assert within(s.response_mean_tokens, 9400, 0.05)
    assert s.response_max_tokens == 16_000
    at_cap = sum(seq.response_tokens == 16_000 for g in trace.groups for seq in g.sequences)
    assert at_cap >= 0.05 * s.num_sequences


def test_search_trace_matches_readme(search_trace: Trace) -> None:
    s = summarize(search_trace)
    print_table(s)
    # README: 10,287 trajectories of 1-5 turns (mostly 2-3), ~78 tokens per turn, retrieval
    # latency mean 0.40 s (p50 0.16, p99 2.7), ~570 appended tokens per call.
    assert s.num_sequences == 10_287 and search_trace.group_size == 8
    assert s.turn_fractions[1] + s.turn_fractions[2] > 0.7
    assert within(s.turn_mean_tokens, 78, 0.05)
    assert within(s.tool_latency_mean_s, 0.40, 0.05)
    assert within(s.tool_latency_p50_s, 0.16, 0.05)
    assert within(s.tool_latency_p99_s, 2.7, 0.05)
    assert within(s.appended_tokens_per_call, 570, 0.05)


# ---------------------------------------------------------------------------------------------
# (b) the fitted workloads agree with the traces


def fitted(workload: str, trace: Trace) -> TraceSummary:
    """Sample as many sequences as the trace holds (max/mean grows with the sample's size)."""
    n = trace.group_size
    batch = 64
    steps = round(trace.num_sequences / (batch * n))
    spec = parse_pipeline_spec(
        make_spec(workload=workload, data={"train_batch_size": batch}, rollout={"n": n, "max_response_length": 8192})
    )
    return summarize(trace_from_plans(f"fitted {workload}", (sample_step(spec, k) for k in range(steps)), n))


def assert_lengths_agree(fit: TraceSummary, real: TraceSummary) -> None:
    assert within(fit.response_p50_tokens, real.response_p50_tokens, 0.25)
    ratio = fit.response_max_over_mean / real.response_max_over_mean
    assert 0.5 <= ratio <= 2.0, f"max/mean {fit.response_max_over_mean:.1f} vs {real.response_max_over_mean:.1f}"
    assert within(fit.group_max_over_mean, real.group_max_over_mean, 0.30)


def test_fitted_math_agrees_with_trace(math_trace: Trace) -> None:
    real = summarize(math_trace)
    fit = fitted("math", math_trace)
    print_table(real, fit)
    assert_lengths_agree(fit, real)


def test_fitted_search_agrees_with_trace(search_trace: Trace) -> None:
    real = summarize(search_trace)
    fit = fitted("search", search_trace)
    print_table(real, fit)
    assert_lengths_agree(fit, real)
    for fit_fraction, real_fraction in zip(fit.turn_fractions, real.turn_fractions, strict=True):
        assert abs(fit_fraction - real_fraction) <= 0.1
    assert within(fit.tool_latency_p50_s, real.tool_latency_p50_s, 0.30)
    assert within(fit.appended_tokens_per_call, real.appended_tokens_per_call, 0.20)


# ---------------------------------------------------------------------------------------------
# (c) replay


def test_replay_is_deterministic_per_seed_and_step(search_trace: Trace) -> None:
    def plans(seed: int, step: int) -> list[object]:
        return list(TraceReplay(search_trace, seed=seed).sample_step(step, train_batch_size=16, n=8))

    first = plans(7, 3)
    print(f"\nreplay seed 7 step 3: {len(first)} plans, first {first[0]}")
    assert first == plans(7, 3)
    assert first != plans(7, 4)
    assert first != plans(8, 3)


@pytest.mark.parametrize(
    "n",
    [
        8,  # the trace's group size: the group as recorded
        4,  # fewer: a subset of the group
        12,  # more: the whole group plus 4 redrawn from it
    ],
)
def test_replay_draws_whole_groups(math_trace: Trace, n: int) -> None:
    plans = TraceReplay(math_trace, seed=1).sample_step(0, train_batch_size=32, n=n)
    assert len(plans) == 32 * n
    recorded = [(g.sequences[0].prompt_tokens, [s.response_tokens for s in g.sequences]) for g in math_trace.groups]
    for start in range(0, len(plans), n):
        prompt = plans[start].prompt_tokens
        drawn = [p.response_tokens for p in plans[start : start + n]]
        # Every response of a drawn group comes from one recorded group; with n = 8 it is that group.
        sources = [lens for p, lens in recorded if p == prompt and set(drawn) <= set(lens)]
        assert sources, f"group at {start} mixes recorded groups"
        if n == 8:
            assert drawn in sources


def test_replay_maps_tool_calls_and_cap(search_trace: Trace) -> None:
    # A 4-turn trajectory with 5 calls: the 5th is folded into the last boundary.
    seq = next(s for g in search_trace.groups for s in g.sequences if len(s.tool_calls) == len(s.turn_tokens) + 1)
    plan = to_plan(seq)
    assert plan.turn_tokens == seq.turn_tokens
    assert len(plan.tool_waits_s) == len(seq.turn_tokens) - 1
    assert sum(plan.tool_waits_s) == pytest.approx(sum(c.latency_s for c in seq.tool_calls))
    # Tokens re-prefilled per sequence are kept (up to rounding of the per-call mean).
    appended = sum(c.appended_tokens for c in seq.tool_calls)
    assert abs(plan.tool_output_tokens * len(plan.tool_waits_s) - appended) <= len(plan.tool_waits_s)
    # A cap below the first turn leaves one truncated turn and no tool waits.
    capped = to_plan(seq, max_response_length=seq.turn_tokens[0] - 1)
    assert capped.turn_tokens == (seq.turn_tokens[0] - 1,) and capped.tool_waits_s == ()


def test_trace_workloads_replay_the_recorded_lengths() -> None:
    from jigsaw_engine.workload.traces import load_trace_file

    spec = parse_pipeline_spec(make_spec(workload="math_trace", rollout={"max_response_length": 20480}))
    plans = sample_step(spec, 0)
    assert len(plans) == spec.train_batch_size * spec.rollout.n
    assert plans == sample_step(spec, 0) and plans != sample_step(spec, 1)  # deterministic per step
    recorded = {
        r for g in load_trace_file("math_dapo_qwen2.5-32b.json").groups for s in g.sequences for r in s.turn_tokens
    }
    assert {p.response_tokens for p in plans} <= recorded  # every length is one the trace recorded


def test_a_missing_trace_says_where_it_looked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from jigsaw_engine.workload.traces import TraceError, load_trace_file

    monkeypatch.setenv("JIGSAW_TRACE_DIR", str(tmp_path))
    load_trace_file.cache_clear()
    spec = parse_pipeline_spec(make_spec(workload="code_trace"))
    with pytest.raises(TraceError, match=f"code_deepcoder_14b.json not found in {tmp_path}"):
        sample_step(spec, 0)
    load_trace_file.cache_clear()
