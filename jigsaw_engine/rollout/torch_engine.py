"""A rollout engine in plain torch: continuous batching over one batched KV cache.

The running batch shares one HF ``DynamicCache``, left-padded: row ``i`` of the cache, of the
attention mask and of ``_CachedBatch.rows`` belong to one request, and each row holds every token of its
request but the last one sampled, which the next decode forward feeds in. Between iterations
the batch changes shape:

* requests that finished, were aborted or exported leave: their rows are dropped, and columns
  that only padding still fills are cut off, so the cache is as wide as its longest row;
* requests that join (new, imported, or every request after ``load_weights``, whose cache was
  computed with the old weights) are prefilled together in their own forward over prompt +
  tokens so far; their cache is then merged in, the narrower side padded on the left.

Positions come from the mask (a row's position is its count of real tokens), so padding never
shifts RoPE. A cached decode and a re-prefill of the same tokens agree to float rounding (about
1e-6 in log-prob), not bit for bit, as batches of other shapes already did without a cache: a
migrated request picks the same tokens unless a choice is that close (greedy: two top logits).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel

from jigsaw_engine.rollout.protocol import (
    MEMORY_RELEASED,
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

    def tokens(self) -> list[int]:
        return [*self.request.prompt_ids, *self.output_ids]

    def finished(self, reason: str) -> FinishedRequest:
        return FinishedRequest(
            request_id=self.request.request_id,
            prompt_ids=self.request.prompt_ids,
            output_ids=tuple(self.output_ids),
            logprobs=tuple(self.logprobs),
            finish_reason=reason,  # type: ignore[arg-type]
        )


@dataclass(slots=True)
class _CachedBatch:
    """The KV cache of the running rows: ``mask`` is 1 where a column holds a real token."""

    rows: list[_Running]
    cache: DynamicCache
    mask: torch.Tensor

    def keep(self, running: Mapping[str, _Running]) -> None:
        """Drop the rows no longer running, then the leading columns no row uses any more."""
        # By identity: an id aborted and added again between iterations is a new request.
        index = [i for i, e in enumerate(self.rows) if running.get(e.request.request_id) is e]
        if len(index) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in index]
        if not self.rows:
            return  # the caller drops an empty batch
        mask = self.mask[index]
        start = int(mask.any(dim=0).int().argmax())
        self.mask = mask[:, start:]
        self.cache = DynamicCache(ddp_cache_data=[(k[index, :, start:], v[index, :, start:]) for k, v, _ in self.cache])

    def merge(self, other: _CachedBatch) -> None:
        """Append ``other``'s rows; the narrower of the two is left-padded to the other's width."""
        width = max(self.mask.shape[1], other.mask.shape[1])

        def widen(t: torch.Tensor, dim: int) -> torch.Tensor:
            missing = width - t.shape[dim]
            return F.pad(t, (0, 0) * (t.dim() - 1 - dim) + (missing, 0)) if missing else t

        self.rows += other.rows
        self.mask = torch.cat([widen(self.mask, 1), widen(other.mask, 1)])
        layers = [
            (torch.cat([widen(k, 2), widen(k2, 2)]), torch.cat([widen(v, 2), widen(v2, 2)]))
            for (k, v, _), (k2, v2, _) in zip(self.cache, other.cache, strict=True)
        ]
        self.cache = DynamicCache(ddp_cache_data=layers)


def _by_request(rows: list[_Running], logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each row's next-token logits (the last position's), by request id."""
    return {e.request.request_id: row for e, row in zip(rows, logits[:, -1, :].float(), strict=True)}


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
        self._cached: _CachedBatch | None = None
        self._last = IterationStats(running=0, decode_tokens=0, prefill_tokens=0)

    @property
    def model(self) -> PreTrainedModel:
        """The policy it samples from (its own copy)."""
        return self._model

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
        """New weights. The cache was computed with the old ones: requests in flight are
        re-prefilled at the next iteration (their tokens count as that iteration's prefill)."""
        self._model.load_state_dict(dict(weights), strict=False)
        self._cached = None

    def release_memory(self) -> str:
        """Drop the KV cache (the weights are the trainer's size and stay); an engine with
        requests in flight keeps it, since they would have to be re-prefilled."""
        if self._running or self._waiting:
            return "kept: requests in flight"
        self._cached = None
        return MEMORY_RELEASED

    def reclaim_memory(self) -> None:
        """Nothing to do: the next prefill builds a new cache."""

    # -- one iteration -------------------------------------------------------------------------
    def step(self) -> list[FinishedRequest]:
        started = time.perf_counter()
        while self._waiting and len(self._running) < self._max_num_seqs:
            entry = self._waiting.pop(0)
            self._running[entry.request.request_id] = entry
        if not self._running:
            self._last = IterationStats(running=0, decode_tokens=0, prefill_tokens=0)
            return []
        logits = self._decode()
        joining = [e for rid, e in self._running.items() if rid not in logits]
        prefill_tokens = sum(len(e.request.prompt_ids) + len(e.output_ids) for e in joining)
        if joining:
            logits.update(self._prefill(joining))
        batch = list(self._running.values())
        finished: list[FinishedRequest] = []
        for entry in batch:
            token, logprob = self._sample(entry, logits[entry.request.request_id])
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

    @torch.no_grad()
    def _decode(self) -> dict[str, torch.Tensor]:
        """One token for every cached row still running; its next-token logits by request id."""
        cached = self._cached
        if cached is None:
            return {}
        cached.keep(self._running)
        if not cached.rows:
            self._cached = None
            return {}
        last = torch.tensor([[e.output_ids[-1]] for e in cached.rows], dtype=torch.long)
        positions = cached.mask.sum(dim=1, keepdim=True)
        cached.mask = F.pad(cached.mask, (0, 1), value=1)
        out = self._model(
            input_ids=last,
            attention_mask=cached.mask,
            position_ids=positions,
            past_key_values=cached.cache,
            use_cache=True,
        )
        cached.cache = out.past_key_values
        return _by_request(cached.rows, out.logits)

    @torch.no_grad()
    def _prefill(self, entries: list[_Running]) -> dict[str, torch.Tensor]:
        """Run ``entries``' tokens so far (left-padded), add their rows to the cache; their logits."""
        sequences = [e.tokens() for e in entries]
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for i, seq in enumerate(sequences):
            ids[i, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[i, width - len(seq) :] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        out = self._model(
            input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=DynamicCache(), use_cache=True
        )
        joined = _CachedBatch(entries, out.past_key_values, mask)
        if self._cached is None:
            self._cached = joined
        else:
            self._cached.merge(joined)
        return _by_request(entries, out.logits)

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
