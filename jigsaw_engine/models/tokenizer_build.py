"""A small byte-level BPE tokenizer trained on the task's own text, with the chat specials.

Digits are split one per token before BPE runs: merged digit strings ("17" as one token) make
arithmetic much harder for a model of a million parameters. Byte-level means any text still
encodes, so an environment's feedback never hits an unknown character.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from jigsaw_engine.models.chat import EOS, PAD, SPECIAL_TOKENS


def build_tokenizer(
    corpus: Iterable[str],
    *,
    vocab_size: int = 512,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    pad: str = PAD,
    eos: str = EOS,
) -> PreTrainedTokenizerFast:
    """Train a tokenizer on ``corpus``; ``special_tokens`` (by default those of
    :mod:`jigsaw_engine.models.chat`) come first."""
    if vocab_size < 300:
        raise ValueError(f"vocab_size: must be >= 300 (256 bytes + specials + merges), got {vocab_size}")
    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=pad, eos_token=eos)
