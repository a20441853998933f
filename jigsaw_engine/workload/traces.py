"""Real rollout traces: load them, summarize what matters to the scheduler, replay them as steps.

The three traces in ``data/traces/`` (see its README) come in three shapes; the loaders put
them into one typed form, :class:`Trace`: prompt groups of sequences, each with its prompt, the
tokens generated in each turn and the tool calls between turns. :func:`summarize` reduces a trace
to the figures a scheduler cares about (tails, within-group spread, turns, tool waits), and
:class:`TraceReplay` turns a trace into :class:`~jigsaw_engine.workload.plans.SequencePlan` steps so
that the simulator can run the recorded workload instead of a fitted one.

Paths are always passed in: the engine reads no environment variables.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jigsaw_engine.errors import JigsawError
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.workload.plans import SequencePlan, step_rng

MAX_TURNS_REPORTED = 5
"""Turn counts are reported as fractions of 1..5 turns; longer sequences count as 5."""


class TraceError(JigsawError):
    """A trace file that does not have the documented shape."""

    code = "trace_invalid"


@dataclass(frozen=True, slots=True)
class ToolCall:
    latency_s: float
    """Wall time of the tool itself (retrieval, sandbox), without the engine's queueing."""
    appended_tokens: int
    """Tokens the tool output adds to the context, prefilled before the next turn."""


@dataclass(frozen=True, slots=True)
class TraceSequence:
    prompt_tokens: int
    turn_tokens: tuple[int, ...]
    """Generated tokens of each turn, in order (one entry for single-turn traces)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls in order. Usually one per turn boundary, but a recorded turn can issue several."""

    @property
    def response_tokens(self) -> int:
        return sum(self.turn_tokens)


@dataclass(frozen=True, slots=True)
class TraceGroup:
    step: int
    """Training step the group was recorded at."""
    sequences: tuple[TraceSequence, ...]
    """The responses to one prompt (GRPO's group)."""


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    groups: tuple[TraceGroup, ...]

    @property
    def num_sequences(self) -> int:
        return sum(len(g.sequences) for g in self.groups)

    @property
    def group_size(self) -> int:
        """The most common number of responses per prompt (the run's ``rollout.n``)."""
        return Counter(len(g.sequences) for g in self.groups).most_common(1)[0][0]


# --------------------------------------------------------------------------------------------
# Loaders


def load_math_trace(path: Path) -> Trace:
    """DAPO math trace: a JSON list of ``{step, prompt_len, response_lens}``; one turn, no tools."""
    return Trace(path.name, _single_turn_groups(_read_json(path), str(path)))


def load_code_trace(path: Path) -> Trace:
    """DeepCoder trace: ``{"prompts": [...]}`` as in the math trace; response lengths only.

    The per-batch ``reward_timings`` (unit tests run on CPUs) are not per sequence and are left out.
    """
    data = _read_json(path)
    if not isinstance(data, Mapping) or "prompts" not in data:
        raise TraceError(f"{path}: expected an object with a 'prompts' list")
    return Trace(path.name, _single_turn_groups(data["prompts"], f"{path}:prompts"))


def load_search_trace(path: Path) -> Trace:
    """Search-R1 multi-turn trace: gzip JSON, one record per trajectory, grouped by ``(step, group)``."""
    records = _read_json(path)
    if not isinstance(records, list):
        raise TraceError(f"{path}: expected a list of trajectories")
    by_group: dict[tuple[int, int], list[TraceSequence]] = defaultdict(list)
    for i, rec in enumerate(records):
        where = f"{path}[{i}]"
        turns = tuple(_int(t, "completion_tokens", f"{where}.turns") for t in _list(rec, "turns", where))
        if not turns:
            raise TraceError(f"{where}.turns: a trajectory needs at least one turn")
        calls = tuple(
            ToolCall(_float(c, "latency_s", f"{where}.tool_calls"), _int(c, "appended_tokens", f"{where}.tool_calls"))
            for c in _list(rec, "tool_calls", where)
        )
        key = (_int(rec, "step", where), _int(rec, "group", where))
        by_group[key].append(TraceSequence(_int(rec, "prompt_len", where), turns, calls))
    groups = tuple(TraceGroup(step, tuple(seqs)) for (step, _), seqs in sorted(by_group.items()))
    return Trace(path.name, groups)


def trace_from_plans(name: str, steps: Iterable[Sequence[SequencePlan]], n: int) -> Trace:
    """Wrap sampled steps (``n`` consecutive plans per prompt) as a trace, to summarize them alike."""
    groups: list[TraceGroup] = []
    for step, plans in enumerate(steps):
        for start in range(0, len(plans), n):
            seqs = tuple(
                TraceSequence(
                    p.prompt_tokens,
                    p.turn_tokens,
                    tuple(ToolCall(wait, p.tool_output_tokens) for wait in p.tool_waits_s),
                )
                for p in plans[start : start + n]
            )
            groups.append(TraceGroup(step, seqs))
    return Trace(name, tuple(groups))


def _single_turn_groups(prompts: Any, where: str) -> tuple[TraceGroup, ...]:
    if not isinstance(prompts, list):
        raise TraceError(f"{where}: expected a list of prompts")
    groups: list[TraceGroup] = []
    for i, rec in enumerate(prompts):
        at = f"{where}[{i}]"
        prompt = _int(rec, "prompt_len", at)
        lens = _list(rec, "response_lens", at)
        seqs = tuple(TraceSequence(prompt, (_as_int(v, f"{at}.response_lens"),)) for v in lens)
        groups.append(TraceGroup(_int(rec, "step", at), seqs))
    return tuple(groups)


def _read_json(path: Path) -> Any:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceError(f"{path}: cannot read trace ({exc})") from exc


def _field(rec: Any, key: str, where: str) -> Any:
    if not isinstance(rec, Mapping) or key not in rec:
        raise TraceError(f"{where}: missing '{key}'")
    return rec[key]


def _list(rec: Any, key: str, where: str) -> list[Any]:
    value = _field(rec, key, where)
    if not isinstance(value, list):
        raise TraceError(f"{where}.{key}: expected a list")
    return value


def _as_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TraceError(f"{where}: expected a non-negative integer, got {value!r}")
    return value


def _int(rec: Any, key: str, where: str) -> int:
    return _as_int(_field(rec, key, where), f"{where}.{key}")


def _float(rec: Any, key: str, where: str) -> float:
    value = _field(rec, key, where)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TraceError(f"{where}.{key}: expected a non-negative number, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------
# Summary


@dataclass(frozen=True, slots=True)
class TraceSummary:
    name: str
    num_groups: int
    num_sequences: int
    response_mean_tokens: float
    """Generated tokens per sequence, all turns (tool output excluded)."""
    response_p50_tokens: float
    response_p90_tokens: float
    response_p99_tokens: float
    response_max_tokens: int
    response_max_over_mean: float
    """The straggler's weight: how much longer the longest sequence is than the average."""
    group_max_over_mean: float
    """Mean over groups (of 2 or more) of longest / mean response: what a group waits for."""
    turn_fractions: tuple[float, ...]
    """Share of sequences with 1, 2, ..., 5 turns (5 includes longer)."""
    turn_mean_tokens: float
    """Generated tokens per turn."""
    turn_p50_tokens: float
    tool_latency_mean_s: float
    """Over all tool calls; 0 for traces without tools."""
    tool_latency_p50_s: float
    tool_latency_p99_s: float
    appended_tokens_per_call: float


def summarize(trace: Trace) -> TraceSummary:
    """Per-trace statistics; percentiles are nearest-rank (the value at rank ``ceil(q * n)``)."""
    seqs = [s for g in trace.groups for s in g.sequences]
    if not seqs:
        raise TraceError(f"{trace.name}: empty trace")
    responses = sorted(s.response_tokens for s in seqs)
    turns = sorted(t for s in seqs for t in s.turn_tokens)
    latencies = sorted(c.latency_s for s in seqs for c in s.tool_calls)
    appended = [c.appended_tokens for s in seqs for c in s.tool_calls]
    group_ratios = [_max_over_mean([s.response_tokens for s in g.sequences]) for g in trace.groups]
    turn_counts = Counter(min(len(s.turn_tokens), MAX_TURNS_REPORTED) for s in seqs)
    mean_response = _mean(responses)
    return TraceSummary(
        name=trace.name,
        num_groups=len(trace.groups),
        num_sequences=len(seqs),
        response_mean_tokens=mean_response,
        response_p50_tokens=_percentile(responses, 0.5),
        response_p90_tokens=_percentile(responses, 0.9),
        response_p99_tokens=_percentile(responses, 0.99),
        response_max_tokens=responses[-1],
        response_max_over_mean=responses[-1] / mean_response if mean_response else 0.0,
        group_max_over_mean=_mean([r for r in group_ratios if r is not None]),
        turn_fractions=tuple(turn_counts[k] / len(seqs) for k in range(1, MAX_TURNS_REPORTED + 1)),
        turn_mean_tokens=_mean(turns),
        turn_p50_tokens=_percentile(turns, 0.5),
        tool_latency_mean_s=_mean(latencies),
        tool_latency_p50_s=_percentile(latencies, 0.5),
        tool_latency_p99_s=_percentile(latencies, 0.99),
        appended_tokens_per_call=_mean(appended),
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _max_over_mean(lengths: Sequence[int]) -> float | None:
    """Longest over mean of one group; ``None`` for a group of one or of empty responses."""
    if len(lengths) < 2 or not sum(lengths):
        return None
    return max(lengths) / _mean(lengths)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q * len(sorted_values)))
    return float(sorted_values[rank - 1])


# --------------------------------------------------------------------------------------------
# Replay


class TraceReplay:
    """Replays a trace as steps of :class:`SequencePlan`, deterministically per ``(seed, step)``.

    Each step draws ``train_batch_size`` whole groups from the trace, without replacement while the
    trace has enough groups (a real step has distinct prompts), with replacement beyond that. A
    group's responses stay together, so within-group spread is the recorded one. When ``n``
    differs from a group's size: for fewer, a random subset of its responses (as if the run had
    sampled fewer); for more, all of them plus extras drawn with replacement from the same group.

    Tool calls map onto turn boundaries in order; a recorded turn that issued several calls has
    the later ones folded into the last boundary (latencies summed). ``SequencePlan`` carries one
    tool-output size per sequence, so it gets the sequence's mean appended tokens per boundary,
    which keeps the tokens re-prefilled per sequence. ``max_response_length`` truncates turns as
    the fitted sampler does; calls after the last kept turn are dropped.
    """

    def __init__(self, trace: Trace, *, seed: int) -> None:
        if not trace.groups:
            raise TraceError(f"{trace.name}: cannot replay an empty trace")
        self.trace = trace
        self.seed = seed

    def sample_step(
        self, step: int, *, train_batch_size: int, n: int, max_response_length: int | None = None
    ) -> list[SequencePlan]:
        """``train_batch_size * n`` plans; ``n`` consecutive plans share a prompt, as in ``sample_step``."""
        if train_batch_size < 1 or n < 1:
            raise ValueError("train_batch_size and n must be >= 1")
        rng = step_rng(self.seed, step)
        groups = self.trace.groups
        if train_batch_size <= len(groups):
            picks = rng.sample(range(len(groups)), train_batch_size)
        else:
            picks = rng.choices(range(len(groups)), k=train_batch_size)
        plans: list[SequencePlan] = []
        for index in picks:
            seqs = groups[index].sequences
            if n <= len(seqs):
                chosen = list(seqs) if n == len(seqs) else rng.sample(seqs, n)
            else:
                chosen = [*seqs, *rng.choices(seqs, k=n - len(seqs))]
            plans.extend(to_plan(s, max_response_length) for s in chosen)
        return plans

    def plan_step(self, spec: PipelineSpec, step: int) -> list[SequencePlan]:
        """A pipeline's step, sized and capped by its spec (the seed is this replay's)."""
        return self.sample_step(
            step,
            train_batch_size=spec.train_batch_size,
            n=spec.rollout.n,
            max_response_length=spec.rollout.max_response_length,
        )


def to_plan(seq: TraceSequence, max_response_length: int | None = None) -> SequencePlan:
    """One recorded sequence as a plan (see :class:`TraceReplay` for how tool calls map)."""
    turns: list[int] = []
    budget = max_response_length if max_response_length is not None else math.inf
    for tokens in seq.turn_tokens:
        take = int(min(tokens, budget))
        turns.append(take)
        budget -= take
        if budget <= 0:
            break
    boundaries = len(turns) - 1
    waits = [c.latency_s for c in seq.tool_calls[:boundaries]]
    waits += [0.0] * (boundaries - len(waits))
    used = list(seq.tool_calls[:boundaries])
    if boundaries and len(seq.tool_calls) > boundaries and len(turns) == len(seq.turn_tokens):
        extra = seq.tool_calls[boundaries:]
        waits[-1] += sum(c.latency_s for c in extra)
        used += extra
    output_tokens = round(sum(c.appended_tokens for c in used) / boundaries) if boundaries else 0
    return SequencePlan(seq.prompt_tokens, tuple(turns), tuple(waits), output_tokens)


# --------------------------------------------------------------------------------------------
# Trace workloads


def trace_dir() -> Path:
    """``$JIGSAW_TRACE_DIR``, else the repository's own ``data/traces``."""
    configured = os.environ.get("JIGSAW_TRACE_DIR")
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "data" / "traces"


_LOADERS = {"math": load_math_trace, "code": load_code_trace, "search": load_search_trace}


@cache
def load_trace_file(name: str) -> Trace:
    """A trace of :func:`trace_dir` by file name; the loader is chosen by its prefix."""
    path = trace_dir() / name
    if not path.exists():
        raise TraceError(f"trace {name} not found in {path.parent}; set JIGSAW_TRACE_DIR to the traces folder")
    loader = _LOADERS.get(name.split("_", 1)[0])
    if loader is None:
        raise TraceError(f"trace {name}: no loader for it (known prefixes: {', '.join(_LOADERS)})")
    return loader(path)


def replay_step(spec: PipelineSpec, step: int) -> list[SequencePlan]:
    """The step of a pipeline whose workload replays a trace (seeded by the pipeline's seed)."""
    assert spec.workload.trace is not None
    return TraceReplay(load_trace_file(spec.workload.trace), seed=spec.seed).plan_step(spec, step)
