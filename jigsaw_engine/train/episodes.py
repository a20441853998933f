"""Drive environment episodes through a rollout engine, many at once.

Every episode's current turn is one engine request; when a request finishes, its reply goes to
the environment, and if the episode goes on, the observation is appended and the whole
conversation so far becomes the next request (the engine re-prefills it). Episodes that wait
on a tool do not hold up the others' decoding beyond the tool call itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from transformers import PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import Environment, EnvTask, Episode
from jigsaw_engine.models.chat import ChatFormat
from jigsaw_engine.rollout.protocol import FinishedRequest, RolloutEngine, RolloutRequest, SamplingParams
from jigsaw_engine.train.token_batch import Sample


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    task: EnvTask
    group: int
    """Index of the task in this step's batch: the responses GRPO compares with each other."""
    index: int
    """Which of the group's ``n`` episodes this is."""
    sample: Sample
    reward: float
    num_turns: int
    response_tokens: int
    """Tokens the model wrote, over all turns."""
    truncated: bool
    """Some reply hit the token limit (the overlong penalty reads this)."""
    tool_s: float
    turn_tokens: tuple[int, ...] = ()
    """Tokens the model wrote in each turn."""
    observation_tokens: tuple[int, ...] = ()
    """Tokens of each observation between turns (feedback, a tool's result)."""
    tool_waits_s: tuple[float, ...] = ()
    """Wall time of each turn's environment call but the last."""
    reward_error: str = ""
    """Why the reward failed on the last reply (its score is then the failure's); empty: it scored."""


@dataclass(slots=True)
class _Live:
    task: EnvTask
    group: int
    index: int
    episode: Episode
    seed: int
    tokens: list[int]
    written: list[bool]
    turns: int = 0
    truncated: bool = False
    tool_s: float = 0.0
    replies: list[str] = field(default_factory=list)
    turn_tokens: list[int] = field(default_factory=list)
    observation_tokens: list[int] = field(default_factory=list)
    tool_waits_s: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RolloutTiming:
    generate_s: float
    tool_s: float


class EpisodeBatch:
    """``n`` episodes per task on one engine, advanced in slices (a decode bucket at a time).

    Seeds are ``sampling.seed`` plus the episode's index, so a step replays identically.
    """

    def __init__(
        self,
        engine: RolloutEngine,
        env: Environment,
        tokenizer: PreTrainedTokenizerFast,
        tasks: Sequence[EnvTask],
        *,
        n: int,
        sampling: SamplingParams,
        request_prefix: str = "",
        first_group: int = 0,
    ) -> None:
        self._engine, self._env, self._tokenizer, self._sampling = engine, env, tokenizer, sampling
        self._chat = ChatFormat(tokenizer)
        self._stop_ids = tuple(sorted({*sampling.stop_token_ids, *self._chat.stop_ids}))
        self._live: dict[str, _Live] = {}
        self._results: dict[str, EpisodeResult] = {}
        self._order: list[str] = []
        self.generate_s = 0.0
        self.tool_s = 0.0
        for offset, task in enumerate(tasks):
            group = first_group + offset
            prompt = self._chat.prompt_ids(task.conversation())
            for k in range(n):
                episode_id = f"{request_prefix}{group}-{k}"
                self._order.append(episode_id)
                seed = sampling.seed + group * n + k
                state = _Live(task, group, k, env.episode(task), seed, list(prompt), [False] * len(prompt))
                self._live[episode_id] = state
                _submit(engine, episode_id, state, sampling, self._stop_ids)

    @property
    def size(self) -> int:
        return len(self._order)

    @property
    def live(self) -> int:
        """Episodes not finished yet (decoding, or between turns)."""
        return len(self._live)

    def advance(self, *, until_live_at_most: int = 0) -> None:
        """Step the engine until at most ``until_live_at_most`` episodes are unfinished."""
        started = time.perf_counter()
        tool_before = self.tool_s
        # An engine in another process steps until a request finishes in one call (the same
        # iterations: nothing happens here on an iteration where none finishes).
        step = getattr(self._engine, "step_until_finished", self._engine.step)
        while len(self._live) > until_live_at_most and self._engine.has_unfinished():
            for finished in step():
                episode_id = finished.request_id.rsplit("#", 1)[0]
                state = self._live[episode_id]
                before = state.tool_s
                done = _advance(state, finished, self._env, self._tokenizer, self._chat)
                self.tool_s += state.tool_s - before
                if done is not None:
                    self._results[episode_id] = done
                    del self._live[episode_id]
                else:
                    _submit(self._engine, episode_id, state, self._sampling, self._stop_ids)
        self.generate_s += time.perf_counter() - started - (self.tool_s - tool_before)

    def hand_over_to(self, target: EpisodeBatch) -> int:
        """Move every unfinished episode to ``target``'s engine: tail consolidation.

        The requests are exported from this engine (prompt, tokens so far, sampling state) and
        re-prefilled on the target's; the episodes' own state moves with them. Sampling is
        portable, so they finish exactly as they would have here. Returns how many moved.
        """
        if target is self:
            return 0
        moved = self._engine.export_requests()
        target._engine.import_requests(moved)
        count = len(self._live)
        target._live.update(self._live)
        self._live.clear()
        return count

    def results(self) -> list[EpisodeResult]:
        """The results of the episodes that finished on this batch's engine, by (task, index)."""
        if self._live:
            raise RuntimeError(f"{len(self._live)} episodes are still running; advance the batch to the end first")
        return sorted(self._results.values(), key=lambda r: (r.group, r.index))


def collect_episodes(
    engine: RolloutEngine,
    env: Environment,
    tokenizer: PreTrainedTokenizerFast,
    tasks: Sequence[EnvTask],
    *,
    n: int,
    sampling: SamplingParams,
    request_prefix: str = "",
) -> tuple[list[EpisodeResult], RolloutTiming]:
    """Run ``n`` episodes per task to the end; results grouped by task, in task order."""
    batch = EpisodeBatch(engine, env, tokenizer, tasks, n=n, sampling=sampling, request_prefix=request_prefix)
    batch.advance()
    return batch.results(), RolloutTiming(generate_s=batch.generate_s, tool_s=batch.tool_s)


def _submit(
    engine: RolloutEngine, episode_id: str, state: _Live, sampling: SamplingParams, stop_ids: tuple[int, ...]
) -> None:
    params = SamplingParams(
        max_tokens=sampling.max_tokens,
        temperature=sampling.temperature,
        seed=state.seed * 131 + state.turns,
        stop_token_ids=stop_ids,
    )
    engine.add_request(RolloutRequest(f"{episode_id}#{state.turns}", tuple(state.tokens), params))


def _advance(
    state: _Live, finished: FinishedRequest, env: Environment, tokenizer: PreTrainedTokenizerFast, chat: ChatFormat
) -> EpisodeResult | None:
    """Hand one finished reply to the environment; the episode's result when it has ended."""
    state.tokens.extend(finished.output_ids)
    state.written.extend([True] * len(finished.output_ids))
    state.turns += 1
    state.truncated |= finished.finish_reason == "length"
    reply = tokenizer.decode(list(finished.output_ids), skip_special_tokens=True)
    state.replies.append(reply)
    state.turn_tokens.append(len(finished.output_ids))
    turn = state.episode.respond(reply)
    state.tool_s += turn.tool_s
    if not turn.done and state.turns < env.max_turns and finished.finish_reason == "stop":
        observation = chat.observation_ids("tool" if turn.role == "tool" else "user", turn.observation)
        state.tokens.extend(observation)
        state.written.extend([False] * len(observation))
        state.observation_tokens.append(len(observation))
        state.tool_waits_s.append(turn.tool_s)
        return None
    reward = turn.reward if turn.done else 0.0
    return EpisodeResult(
        task=state.task,
        group=state.group,
        index=state.index,
        sample=Sample(tuple(state.tokens), tuple(state.written)),
        reward=reward,
        num_turns=state.turns,
        response_tokens=sum(state.written),
        truncated=state.truncated,
        tool_s=state.tool_s,
        turn_tokens=tuple(state.turn_tokens),
        observation_tokens=tuple(state.observation_tokens),
        tool_waits_s=tuple(state.tool_waits_s),
        reward_error=turn.reward_error if turn.done else "",
    )
