"""An offline tokenizer for tiny models: byte-level BPE trained in memory.

Byte-level means every string is encodable (the 256 bytes are the base alphabet), so the
tokenizer never needs an unknown token; ``<unk>`` exists only because some tools expect
one. Training is deterministic for a given corpus and vocabulary size. The result is a
regular ``transformers`` fast tokenizer: ``save_pretrained`` writes JSON files only and
``AutoTokenizer.from_pretrained`` reads them back.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from codyra.llm.model import MODEL_BUILD_LOCK
from codyra.mini.trace.tasks import MINI_TRACE_TASKS
from codyra.trace.data import load_split

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast


def _fast_tokenizer_class():
    with MODEL_BUILD_LOCK:  # transformers' lazy imports are not safe from two job threads at once
        from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast


SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
# Large enough that every mini TRACE prompt stays well under 64 tokens (512 would not).
MINI_TRACE_VOCAB_SIZE = 1024


# GPT-2's pre-tokenization pattern (the one pre_tokenizers.ByteLevel applies), except that a
# word keeps a colon that follows it: "Answer:", "Stance:", "Summary:" can each become one
# token, so a prompt's last token names its cue instead of a ":" every task ends with, and a
# task's answer format can hang on that token rather than on the whole context.
_WORDS_WITH_CUE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+:?| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_WORDS_WITH_CUE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE with at most ``vocab_size`` entries (bytes, merges and the four special
    tokens), wrapped with BOS ``<s>``, EOS ``</s>``, pad ``<pad>`` and unk ``<unk>``.
    Special tokens are never added automatically: callers place BOS and EOS themselves."""
    special = list(SPECIAL_TOKENS.values())
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(special):
        raise ValueError(f"vocab_size {vocab_size} is below the {len(alphabet)} bytes + {len(special)} special tokens")
    backend = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    backend.pre_tokenizer = _pre_tokenizer()
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    return _fast_tokenizer_class()(tokenizer_object=backend, **SPECIAL_TOKENS)


def train_mini_trace_tokenizer(root: str | Path, vocab_size: int = MINI_TRACE_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """The mini TRACE tokenizer: trained on the prompts and answers of the train splits
    written by :func:`codyra.mini.trace.tasks.write_mini_trace` under ``root``."""
    texts = [
        text
        for task in MINI_TRACE_TASKS
        for example in load_split(Path(root) / task, "train")
        for text in (example.prompt, example.answer)
    ]
    return train_bpe_tokenizer(texts, vocab_size)
