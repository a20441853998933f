"""The rollout engines (torch, and vLLM where installed): what the controller and migration rely on.

Every engine test runs on each engine through the ``make_engine`` fixture (tests/train/conftest.py).
"""

from __future__ import annotations

import sys

import pytest
import torch

from jigsaw_engine.models.chat import EOS, render_turn
from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams, run_to_completion
from jigsaw_engine.rollout.vllm_engine import RolloutEngineUnavailableError, VllmRolloutEngine
from jigsaw_engine.train.token_batch import Sample, batch_log_probs, collate


def _requests(policy, prompts: list[str], *, temperature: float, max_tokens: int = 10, prefix: str = "r"):
    eos = policy.tokenizer.convert_tokens_to_ids(EOS)
    return [
        RolloutRequest(
            f"{prefix}{i}",
            tuple(policy.tokenizer.encode(render_turn("user", p))),
            SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=100 + i, stop_token_ids=(eos,)),
        )
        for i, p in enumerate(prompts)
    ]


PROMPTS = [f"Compute {a}+{b}." for a, b in [(1, 2), (7, 8), (9, 9), (0, 4), (5, 3), (6, 6)]]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_migrated_requests_continue_exactly_as_they_would_have(arith_policy, make_engine, temperature):
    """Export after 3 iterations, re-prefill on a second engine that is already busy with other
    requests: the tokens are the same as an uninterrupted run (greedy, and seeded sampling)."""
    baseline = run_to_completion(make_engine(arith_policy), _requests(arith_policy, PROMPTS, temperature=temperature))

    source = make_engine(arith_policy)
    for request in _requests(arith_policy, PROMPTS, temperature=temperature):
        source.add_request(request)
    finished = {f.request_id: f for _ in range(3) for f in source.step()}
    exported = source.export_requests()
    assert not source.has_unfinished()
    assert exported and all(len(e.output_ids) == 3 for e in exported)

    target = make_engine(arith_policy)
    for request in _requests(arith_policy, ["Compute 2+2.", "Compute 8+1."], temperature=1.0, prefix="other"):
        target.add_request(request)
    target.step()
    target.import_requests(exported)
    while target.has_unfinished():
        finished.update({f.request_id: f for f in target.step() if not f.request_id.startswith("other")})

    for expected in baseline:
        got = finished[expected.request_id]
        assert got.output_ids == expected.output_ids
        assert got.finish_reason == expected.finish_reason


def test_abort_returns_the_partial_reply_and_forgets_the_request(arith_policy, make_engine):
    engine = make_engine(arith_policy)
    for request in _requests(arith_policy, PROMPTS[:2], temperature=1.0, max_tokens=10):
        engine.add_request(request)
    engine.step()
    engine.step()
    aborted = engine.abort_request("r0")
    assert aborted is not None and aborted.finish_reason == "abort" and len(aborted.output_ids) == 2
    assert engine.abort_request("r0") is None
    assert engine.num_unfinished() == 1


def test_iteration_stats_show_prefill_then_decode_and_the_batch_shrinking(arith_policy, make_engine):
    engine = make_engine(arith_policy)
    requests = _requests(arith_policy, PROMPTS, temperature=1.0, max_tokens=12)
    for request in requests:
        engine.add_request(request)
    engine.step()
    first = engine.last_iteration()
    assert first.running == len(PROMPTS)
    assert first.prefill_tokens == sum(len(r.prompt_ids) for r in requests)
    running = [first.running]
    while engine.has_unfinished():
        engine.step()
        assert engine.last_iteration().prefill_tokens == 0
        running.append(engine.last_iteration().running)
    assert running == sorted(running, reverse=True) and running[-1] >= 1


def test_duplicate_request_ids_are_refused(arith_policy, make_engine):
    engine = make_engine(arith_policy)
    request = _requests(arith_policy, PROMPTS[:1], temperature=1.0)[0]
    engine.add_request(request)
    with pytest.raises(ValueError, match="request_id: 'r0' is already in this engine"):
        engine.add_request(request)


def test_loaded_weights_change_what_the_engine_writes(arith_policy, make_engine):
    """Weight sync is real: the same greedy requests before and after loading other weights."""
    engine = make_engine(arith_policy)
    before = run_to_completion(engine, _requests(arith_policy, PROMPTS, temperature=0.0))
    other = arith_policy.fresh_model()
    for parameter in other.parameters():
        parameter.data.mul_(0.0)
    engine.load_weights(other.state_dict())
    after = run_to_completion(engine, _requests(arith_policy, PROMPTS, temperature=0.0, prefix="again"))
    assert [b.output_ids for b in before] != [a.output_ids for a in after]
    # Zero weights give uniform logits: argmax is token 0 every time, up to the token limit.
    assert all(set(a.output_ids) == {0} and a.finish_reason == "length" for a in after)


def test_sampling_params_reject_bad_values():
    with pytest.raises(ValueError, match="max_tokens: must be >= 1"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="temperature: must be >= 0"):
        SamplingParams(max_tokens=4, temperature=-1.0)


def test_vllm_log_probs_match_the_trainers_after_a_weight_update(arith_policy, vllm_engine):
    """What GRPO relies on: after the trainer's weights are loaded into vLLM, vLLM's log-probs of
    its greedy replies are the trainer's (to float rounding), and not the old weights'."""
    trainer = arith_policy.updated_model(0.02)
    vllm_engine.load_weights(trainer.state_dict())
    replies = run_to_completion(vllm_engine, _requests(arith_policy, PROMPTS, temperature=0.0))

    samples = [
        Sample(r.prompt_ids + r.output_ids, (False,) * len(r.prompt_ids) + (True,) * len(r.output_ids)) for r in replies
    ]
    batch = collate(samples, pad_token_id=arith_policy.tokenizer.pad_token_id)
    mask = batch.response_mask.bool()
    reported = torch.tensor([lp for r in replies for lp in r.logprobs])
    assert torch.allclose(reported, batch_log_probs(trainer, batch, micro_batch_size=8)[mask], atol=1e-3)
    before_update = batch_log_probs(arith_policy.fresh_model(), batch, micro_batch_size=8)[mask]
    assert (reported - before_update).abs().max() > 1e-2


def test_vllm_engine_without_vllm_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # what `import vllm` sees when it is absent
    with pytest.raises(RolloutEngineUnavailableError, match=r"pip install -e \.\[rollout-cpu\]") as caught:
        VllmRolloutEngine(tmp_path)
    assert caught.value.code == "rollout_engine_unavailable"


def test_an_idle_engine_gives_its_memory_back_or_names_why_not_and_writes_the_same_after(arith_policy, make_engine):
    """Between rollouts a colocated trainer uses the device: the engine releases what it can
    (the torch engine its KV cache; vLLM sleeps where the platform has sleep mode) and names the
    fallback where it cannot. Generation after taking the memory back is unchanged."""
    from jigsaw_engine.rollout.protocol import MEMORY_RELEASED
    from jigsaw_engine.rollout.vllm_engine import SLEEP_FALLBACK

    engine = make_engine(arith_policy)
    before = run_to_completion(engine, _requests(arith_policy, PROMPTS, temperature=1.0))
    engine.add_request(_requests(arith_policy, PROMPTS[:1], temperature=1.0, prefix="busy")[0])
    assert engine.release_memory() == "kept: requests in flight"
    run_to_completion(engine, [])
    released = engine.release_memory()
    if isinstance(engine, VllmRolloutEngine) and not torch.cuda.is_available():
        assert released == SLEEP_FALLBACK  # the CPU build has no sleep mode: named, memory kept
    else:
        assert released == MEMORY_RELEASED
    engine.reclaim_memory()
    after = run_to_completion(engine, _requests(arith_policy, PROMPTS, temperature=1.0, prefix="again"))
    assert [b.output_ids for b in before] == [a.output_ids for a in after]
