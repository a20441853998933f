"""The torch engine's KV cache: as the batch changes shape (joins, aborts, imports, new weights),
every request still gets the reply a plain full-sequence decode of it alone gives."""

from __future__ import annotations

import pytest
import torch

from jigsaw_engine.models.chat import EOS, render_turn
from jigsaw_engine.rollout.protocol import FinishedRequest, RolloutRequest, SamplingParams, portable_draw
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine

# Prompts of different lengths, so rows are padded differently and the cache is re-cut and merged.
PROMPTS = ["Compute 1+2.", "Compute 7+8. Then add 9.", "Compute 9+9.", "Compute 0+4 and 5+3, then 6+6.", "5+3?", "6+6"]


def _requests(policy, *, temperature: float = 0.0, prefix: str = "r") -> list[RolloutRequest]:
    eos = policy.tokenizer.convert_tokens_to_ids(EOS)
    return [
        RolloutRequest(
            f"{prefix}{i}",
            tuple(policy.tokenizer.encode(render_turn("user", p))),
            SamplingParams(max_tokens=10, temperature=temperature, seed=100 + i, stop_token_ids=(eos,)),
        )
        for i, p in enumerate(PROMPTS)
    ]


@torch.no_grad()
def _alone_without_cache(model, request: RolloutRequest, output_ids: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The reply decoded token by token over the whole sequence, no cache, no batch: the reference."""
    params = request.sampling
    output = list(output_ids)
    while True:
        logits = model(torch.tensor([[*request.prompt_ids, *output]]), use_cache=False).logits[0, -1].float()
        if params.temperature == 0:
            token = int(torch.argmax(logits))
        else:
            token, _ = portable_draw(logits, temperature=params.temperature, seed=params.seed, index=len(output))
        output.append(token)
        if token in params.stop_token_ids or len(output) >= params.max_tokens:
            return tuple(output)


def _engine(policy) -> TorchRolloutEngine:
    return TorchRolloutEngine(policy.fresh_model(), pad_token_id=policy.tokenizer.pad_token_id)


def _drain(engine: TorchRolloutEngine, finished: dict[str, FinishedRequest]) -> None:
    while engine.has_unfinished():
        finished.update({f.request_id: f for f in engine.step()})


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_requests_joining_a_running_batch_get_the_reply_they_get_alone(arith_policy, temperature):
    requests = _requests(arith_policy, temperature=temperature)
    engine = _engine(arith_policy)
    for request in requests[:3]:
        engine.add_request(request)
    finished = {f.request_id: f for _ in range(2) for f in engine.step()}
    for request in requests[3:]:
        engine.add_request(request)
    finished.update({f.request_id: f for f in engine.step()})
    assert engine.last_iteration().prefill_tokens == sum(len(r.prompt_ids) for r in requests[3:])
    _drain(engine, finished)
    for request in requests:
        assert finished[request.request_id].output_ids == _alone_without_cache(arith_policy.model, request)


def test_aborting_a_request_mid_batch_leaves_the_others_replies_unchanged(arith_policy):
    requests = _requests(arith_policy)
    longest = max(requests, key=lambda r: len(r.prompt_ids))
    engine = _engine(arith_policy)
    for request in requests:
        engine.add_request(request)
    finished = {f.request_id: f for _ in range(2) for f in engine.step()}
    assert engine.abort_request(longest.request_id) is not None
    _drain(engine, finished)
    assert longest.request_id not in finished
    for request in requests:
        if request is not longest:
            assert finished[request.request_id].output_ids == _alone_without_cache(arith_policy.model, request)


def test_imported_requests_continue_in_a_busy_engine_as_they_would_alone(arith_policy):
    requests = _requests(arith_policy)
    source, target = _engine(arith_policy), _engine(arith_policy)
    for request in requests[:3]:
        source.add_request(request)
    for request in requests[3:]:
        target.add_request(request)
    finished = {f.request_id: f for _ in range(3) for engine in (source, target) for f in engine.step()}
    moving = source.export_requests([r.request_id for r in requests[:2] if r.request_id not in finished])
    assert moving and all(len(m.output_ids) == 3 for m in moving)
    target.import_requests(moving)
    finished.update({f.request_id: f for f in target.step()})
    assert target.last_iteration().prefill_tokens == sum(len(m.request.prompt_ids) + 3 for m in moving)
    for engine in (source, target):
        _drain(engine, finished)
    for request in requests:
        assert finished[request.request_id].output_ids == _alone_without_cache(arith_policy.model, request)


def test_requests_in_flight_when_weights_are_loaded_continue_with_the_new_weights(arith_policy):
    requests = _requests(arith_policy)
    engine = _engine(arith_policy)
    for request in requests:
        engine.add_request(request)
    finished = {f.request_id: f for _ in range(3) for f in engine.step()}
    in_flight = [r for r in requests if r.request_id not in finished]
    assert in_flight
    updated = arith_policy.updated_model(0.05)
    engine.load_weights(updated.state_dict())
    finished.update({f.request_id: f for f in engine.step()})
    assert engine.last_iteration().prefill_tokens == sum(len(r.prompt_ids) + 3 for r in in_flight)
    _drain(engine, finished)
    for request in requests:
        expected = _alone_without_cache(arith_policy.model, request)
        if request in in_flight:  # three tokens under the old weights, the rest under the new
            expected = _alone_without_cache(updated, request, expected[:3])
        assert finished[request.request_id].output_ids == expected
