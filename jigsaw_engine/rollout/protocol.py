"""The rollout engine's interface, and the plain records that cross it.

Sampling is made portable on purpose: the random draw for a request's k-th token depends only
on the request's seed and k (see :func:`token_seed`), so a request exported mid-generation and
re-prefilled on another engine continues exactly as it would have; under greedy decoding the
tokens are identical by construction, under sampling they are identical given equal logits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import torch

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_tokens: int
    """Reply tokens at most; a reply that reaches it finishes with reason ``length``."""
    temperature: float = 1.0
    """0 means greedy (argmax); RL rollouts sample at 1.0 so log-probs match the trainer's."""
    seed: int = 0
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature: must be >= 0 (0 = greedy), got {self.temperature}")


@dataclass(frozen=True, slots=True)
class RolloutRequest:
    request_id: str
    prompt_ids: tuple[int, ...]
    sampling: SamplingParams


@dataclass(frozen=True, slots=True)
class ExportedRequest:
    """An unfinished request as another engine needs it: prompt, tokens so far, sampling state."""

    request: RolloutRequest
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    """The sampling state is ``request.sampling.seed`` and ``len(output_ids)``: nothing opaque."""


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    request_id: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    """Log-probability of each output token under the sampling distribution."""
    finish_reason: FinishReason


@dataclass(frozen=True, slots=True)
class IterationStats:
    """What one engine iteration did: the controller reads decode-bucket transitions from it."""

    running: int
    """Sequences decoded in this iteration."""
    decode_tokens: int
    """Tokens generated (one per running sequence)."""
    prefill_tokens: int
    """Prompt (or re-prefilled) tokens processed for the first time in this iteration."""
    duration_s: float = 0.0
    extra: Mapping[str, float] = field(default_factory=dict)


class RolloutEngine(Protocol):
    def add_request(self, request: RolloutRequest) -> None:
        """Queue a request; it joins the running batch at the next iteration."""

    def abort_request(self, request_id: str) -> FinishedRequest | None:
        """Stop a request now; what it generated so far, with reason ``abort`` (None if unknown)."""

    def export_requests(self, request_ids: Sequence[str] | None = None) -> list[ExportedRequest]:
        """Remove unfinished requests (all of them when ``request_ids`` is None) for migration."""

    def import_requests(self, exported: Sequence[ExportedRequest]) -> None:
        """Continue requests exported elsewhere: their tokens so far are re-prefilled here."""

    def step(self) -> list[FinishedRequest]:
        """Run one iteration (one token for every running request); the requests that finished."""

    def has_unfinished(self) -> bool: ...

    def last_iteration(self) -> IterationStats: ...

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Replace the model's weights in place (after a training update)."""

    def release_memory(self) -> str:
        """Give back the device memory this engine holds while it has no requests, so a trainer
        sharing its device can use it; how (:data:`MEMORY_RELEASED`, or the fallback by name)."""

    def reclaim_memory(self) -> None:
        """Take the memory back: before the next request or weight load after a release."""


MEMORY_RELEASED = "released"
"""What :meth:`RolloutEngine.release_memory` says when the memory was given back."""


def token_seed(seed: int, index: int) -> int:
    """The seed of the draw for a request's ``index``-th token (a 64-bit mix of both)."""
    x = (seed * 0x9E3779B97F4A7C15 + index * 0xBF58476D1CE4E5B9 + 1) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    x = (x * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 29)) & 0x7FFFFFFFFFFFFFFF


def portable_draw(logits: torch.Tensor, *, temperature: float, seed: int, index: int) -> tuple[int, float]:
    """Draw token ``index`` of a sampled request, and its log-prob at ``temperature``.

    Every engine draws with this rule, so a request migrated between engines (of either kind)
    continues with the same tokens given the same logits.
    """
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    generator = torch.Generator().manual_seed(token_seed(seed, index))
    token = int(torch.multinomial(logprobs.exp(), 1, generator=generator))
    return token, float(logprobs[token])


def run_to_completion(engine: RolloutEngine, requests: Sequence[RolloutRequest]) -> list[FinishedRequest]:
    """Add ``requests`` and step until all finish; results in the order of ``requests``."""
    for request in requests:
        engine.add_request(request)
    done: dict[str, FinishedRequest] = {}
    while engine.has_unfinished():
        for finished in engine.step():
            done[finished.request_id] = finished
    return [done[r.request_id] for r in requests]
