"""Built-in workloads: seeded length and tool-latency distributions fitted to public traces.

Each is described, with the trace it was fitted to, in ``docs/benchmarks.md`` (Workloads).
Lengths are lognormal and capped; a task with tool calls adds turns, tool waits and the tool
output re-prefilled on the next turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    name: str
    prompt_tokens: int
    """Typical prompt length (tokens), prefilled once per sequence."""
    response_median_tokens: float
    """Median generated tokens per turn."""
    response_sigma: float
    """Lognormal sigma of generated tokens per turn: the long tail's weight."""
    turn_weights: tuple[float, ...] = (1.0,)
    """Probability of 1, 2, ... turns per sequence."""
    tool_latency_median_s: float = 0.0
    """Median wall time of one tool call (host-bound: no GPU work)."""
    tool_latency_sigma: float = 0.0
    tool_output_tokens: int = 0
    """Tokens the tool appends to the context, re-prefilled at the next turn."""
    group_correlation: float = 0.5
    """Share of log-length variance shared within a prompt's group (0 = independent)."""
    trace: str | None = None
    """A real trace to replay instead of sampling (a file of the repository's ``data/traces/``, or of
    ``$JIGSAW_TRACE_DIR``): steps draw whole recorded groups. The fitted numbers above then
    only describe it (the trace's fit) for code that reads them."""

    @property
    def is_multi_turn(self) -> bool:
        return len(self.turn_weights) > 1


WORKLOADS: dict[str, WorkloadSpec] = {
    w.name: w
    for w in (
        WorkloadSpec("gsm8k", 160, 280.0, 0.5),
        WorkloadSpec("math", 200, 465.0, 0.72),
        WorkloadSpec(
            "search",
            300,
            57.0,
            0.8,
            turn_weights=(0.07, 0.43, 0.34, 0.11, 0.05),
            tool_latency_median_s=0.16,
            tool_latency_sigma=1.2,
            tool_output_tokens=570,
            group_correlation=0.3,
        ),
        WorkloadSpec(
            "aime_refine",
            250,
            2000.0,
            0.45,
            turn_weights=(0.0, 0.4, 0.35, 0.25),
            tool_latency_median_s=0.05,
            tool_latency_sigma=0.3,
            tool_output_tokens=60,
        ),
        WorkloadSpec(
            "code_tool",
            350,
            350.0,
            0.6,
            turn_weights=(0.0, 0.0, 0.3, 0.3, 0.2, 0.2),
            tool_latency_median_s=0.3,
            tool_latency_sigma=0.9,
            tool_output_tokens=200,
        ),
    )
}
# The real traces as workloads of their own, each beside the fitted workload that describes it.
WORKLOADS.update(
    {
        "math_trace": replace(WORKLOADS["math"], name="math_trace", trace="math_dapo_qwen2.5-32b.json"),
        "code_trace": replace(WORKLOADS["math"], name="code_trace", trace="code_deepcoder_14b.json"),
        "search_trace": replace(
            WORKLOADS["search"], name="search_trace", trace="search_r1_multiturn_qwen2.5-7b.json.gz"
        ),
    }
)
