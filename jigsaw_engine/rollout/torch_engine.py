"""A rollout engine in plain torch: continuous batching without a KV cache.

Every iteration runs one forward over the whole running batch (left-padded), so a request that
joins, leaves or arrives from another engine needs no cache bookkeeping: re-prefill is simply
the next forward. That costs O(length) per token instead of O(1), which is nothing for the tiny
models it exists for (tests, machines without vLLM); vLLM is the fast engine behind the same
protocol.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel

from jigsaw_engine.rollout.protocol import (
    ExportedRequest,
    FinishedRequest,
    IterationStats,
    RolloutRequest,
    portable_draw,
)


@dataclass(slots=True)
class _Running:
    request: RolloutRequest
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prefilled: bool = False

    def finished(self, reason: str) -> FinishedRequest:
        return FinishedRequest(
            request_id=self.request.request_id,
            prompt_ids=self.request.prompt_ids,
            output_ids=tuple(self.output_ids),
            logprobs=tuple(self.logprobs),
            finish_reason=reason,  # type: ignore[arg-type]
        )


class TorchRolloutEngine:
    """Implements :class:`~jigsaw_engine.rollout.protocol.RolloutEngine` on an HF causal LM."""

    def __init__(self, model: PreTrainedModel, *, pad_token_id: int, max_num_seqs: int = 256) -> None:
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs: must be >= 1, got {max_num_seqs}")
        self._model = model.eval()
        self._pad = pad_token_id
        self._max_num_seqs = max_num_seqs
        self._max_positions = int(getattr(model.config, "max_position_embeddings", 1 << 30))
        self._running: dict[str, _Running] = {}
        self._waiting: list[_Running] = []
        self._last = IterationStats(running=0, decode_tokens=0, prefill_tokens=0)

    # -- requests ------------------------------------------------------------------------------
    def add_request(self, request: RolloutRequest) -> None:
        self._check_new(request.request_id)
        self._waiting.append(_Running(request))

    def abort_request(self, request_id: str) -> FinishedRequest | None:
        entry = self._running.pop(request_id, None)
        if entry is None:
            entry = next((w for w in self._waiting if w.request.request_id == request_id), None)
            if entry is None:
                return None
            self._waiting.remove(entry)
        return entry.finished("abort")

    def export_requests(self, request_ids: Sequence[str] | None = None) -> list[ExportedRequest]:
        wanted = set(request_ids) if request_ids is not None else None
        exported: list[ExportedRequest] = []
        for entry in [*self._running.values(), *self._waiting]:
            if wanted is None or entry.request.request_id in wanted:
                exported.append(ExportedRequest(entry.request, tuple(entry.output_ids), tuple(entry.logprobs)))
        for item in exported:
            self.abort_request(item.request.request_id)
        return exported

    def import_requests(self, exported: Sequence[ExportedRequest]) -> None:
        for item in exported:
            self._check_new(item.request.request_id)
            self._waiting.append(_Running(item.request, list(item.output_ids), list(item.logprobs)))

    def has_unfinished(self) -> bool:
        return bool(self._running or self._waiting)

    def last_iteration(self) -> IterationStats:
        return self._last

    def num_unfinished(self) -> int:
        return len(self._running) + len(self._waiting)

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        self._model.load_state_dict(dict(weights), strict=False)

    # -- one iteration -------------------------------------------------------------------------
    def step(self) -> list[FinishedRequest]:
        started = time.perf_counter()
        prefill_tokens = self._admit()
        batch = list(self._running.values())
        if not batch:
            self._last = IterationStats(running=0, decode_tokens=0, prefill_tokens=0)
            return []
        logits = self._last_logits([list(e.request.prompt_ids) + e.output_ids for e in batch])
        finished: list[FinishedRequest] = []
        for entry, row in zip(batch, logits, strict=True):
            token, logprob = self._sample(entry, row)
            entry.output_ids.append(token)
            entry.logprobs.append(logprob)
            reason = self._finish_reason(entry, token)
            if reason is not None:
                del self._running[entry.request.request_id]
                finished.append(entry.finished(reason))
        self._last = IterationStats(
            running=len(batch),
            decode_tokens=len(batch),
            prefill_tokens=prefill_tokens,
            duration_s=time.perf_counter() - started,
        )
        return finished

    def _admit(self) -> int:
        """Move waiting requests into the batch; returns the tokens they bring (their prefill)."""
        tokens = 0
        while self._waiting and len(self._running) < self._max_num_seqs:
            entry = self._waiting.pop(0)
            tokens += len(entry.request.prompt_ids) + len(entry.output_ids)
            self._running[entry.request.request_id] = entry
        return tokens

    @torch.no_grad()
    def _last_logits(self, sequences: list[list[int]]) -> torch.Tensor:
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for i, seq in enumerate(sequences):
            ids[i, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[i, width - len(seq) :] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        out = self._model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False)
        logits: torch.Tensor = out.logits[:, -1, :].float()
        return logits

    @staticmethod
    def _sample(entry: _Running, logits: torch.Tensor) -> tuple[int, float]:
        params = entry.request.sampling
        if params.temperature == 0:
            logprobs = torch.log_softmax(logits, dim=-1)
            token = int(torch.argmax(logits))
            return token, float(logprobs[token])
        return portable_draw(logits, temperature=params.temperature, seed=params.seed, index=len(entry.output_ids))

    def _finish_reason(self, entry: _Running, token: int) -> str | None:
        params = entry.request.sampling
        if token in params.stop_token_ids:
            return "stop"
        if len(entry.output_ids) >= params.max_tokens:
            return "length"
        if len(entry.request.prompt_ids) + len(entry.output_ids) >= self._max_positions:
            return "length"
        return None

    def _check_new(self, request_id: str) -> None:
        if request_id in self._running or any(w.request.request_id == request_id for w in self._waiting):
            raise ValueError(f"request_id: {request_id!r} is already in this engine; ids must be unique")
