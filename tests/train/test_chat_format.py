"""Episodes rendered by a tokenizer's own chat template: what the model reads is what the template writes."""

from __future__ import annotations

import pytest

from jigsaw_engine.models.chat import ChatFormat, ChatTemplateError, render_reply, render_turn
from jigsaw_engine.models.tokenizer_build import build_tokenizer
from jigsaw_engine.train.example_checkpoint import CHATML_SPECIALS, CHATML_TEMPLATE

LLAMA3_LIKE = (
    "{{ '<|begin_of_text|>' }}"
    "{% if messages[0]['role'] != 'system' %}"
    "{{ '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023<|eot_id|>' }}"
    "{% endif %}"
    "{% for m in messages %}"
    "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
"""Llama 3's shape: a default system turn, header tokens, ``<|eot_id|>`` closing every turn."""

QWEN3_LIKE = (
    "{% set ns = namespace(last_query=-1) %}"
    "{% for m in messages %}{% if m['role'] == 'user' %}{% set ns.last_query = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' and loop.index0 > ns.last_query %}"
    "{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""Qwen3's quirk: an assistant turn after the last user message is rendered with an empty think
block, so a conversation's earlier text changes when a user message follows it."""

LLAMA3_SPECIALS = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|pad|>")
CORPUS = ["Compute 3+4. #### 7 Wrong: too high. Try again. system user assistant tool"]


def tokenizer_for(template: str):
    if template is LLAMA3_LIKE:
        tok = build_tokenizer(CORPUS, vocab_size=320, special_tokens=LLAMA3_SPECIALS, pad="<|pad|>", eos="<|eot_id|>")
    else:
        tok = build_tokenizer(
            CORPUS, vocab_size=320, special_tokens=CHATML_SPECIALS, pad="<|endoftext|>", eos="<|im_end|>"
        )
    tok.chat_template = template
    return tok


def test_a_tiny_presets_tokens_are_the_projects_own_format():
    tok = build_tokenizer(CORPUS, vocab_size=320)  # no chat template: the preset's
    chat = ChatFormat(tok)
    assert chat.prompt_ids([("user", "Compute 3+4.")]) == tok.encode(render_turn("user", "Compute 3+4."))
    assert chat.observation_ids("tool", "passages") == tok.encode(render_turn("tool", "passages"))
    assert chat.reply_ids("#### 7") == tok.encode(render_reply("#### 7"))
    assert chat.stop_ids == (tok.eos_token_id,)


@pytest.mark.parametrize("template", [CHATML_TEMPLATE, LLAMA3_LIKE, QWEN3_LIKE], ids=["chatml", "llama3", "qwen3"])
def test_a_multi_turn_episode_is_the_templates_rendering_of_the_whole_conversation(template):
    """Prompt, reply, feedback, reply: the tokens the rollout builds piece by piece equal the
    template's rendering of the conversation up to the model's next turn."""
    tok = tokenizer_for(template)
    chat = ChatFormat(tok)
    system_and_user = [("system", "Answer with ####."), ("user", "Compute 3+4.")]
    episode = chat.prompt_ids(system_and_user)
    episode += chat.reply_ids("#### 8")  # the model stops at its end-of-turn token
    episode += chat.observation_ids("user", "Wrong: too high. Try again.")
    conversation = [*system_and_user, ("assistant", "#### 8"), ("user", "Wrong: too high. Try again.")]
    rendered = tok.apply_chat_template(
        [{"role": r, "content": c} for r, c in conversation], tokenize=False, add_generation_prompt=True
    )
    if template is QWEN3_LIKE:  # an earlier assistant turn has no think block once a user follows
        assert "<think>" not in rendered
    assert tok.decode(episode) == rendered
    assert chat.end_of_turn_id in chat.stop_ids


def test_a_template_that_cannot_render_a_reply_is_refused():
    tok = tokenizer_for(CHATML_TEMPLATE)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"  # no roles, no turn ends
    with pytest.raises(ChatTemplateError, match="end"):
        ChatFormat(tok)
