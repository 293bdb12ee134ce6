"""TRACE task folders: loading with precise errors, and tokenisation.

A task folder holds ``train.json``, ``eval.json`` and ``test.json``, each a JSON list of
``{"prompt": str, "answer": str}`` records; the prompt already contains the instruction
(no chat template is applied).

Sequences are ``BOS + prompt + answer + EOS`` with the loss on the answer and EOS only, as in
TRACE. How prompt and answer become tokens is ``llm.tokenization``:

- ``trace`` (default): TRACE's ``DataCollator`` (BeyonderXX/TRACE, utils/data/data_collator.py).
  Training tokenises ``prompt + answer`` as one string, keeps its last
  ``max_prompt_len + max_answer_len`` tokens (truncation side left), appends EOS and then
  prepends BOS, each only while the sequence is shorter than that limit. The label length
  is taken from the answer tokenised on its own (+ EOS, same rule), and the labels are the
  last that many tokens. A tokenizer that tokenises the answer differently inside the joint
  string (SentencePiece adds a word-boundary piece to a text's start) shifts that mask, as in
  TRACE. Generation keeps the prompt's last ``max_prompt_len`` tokens and prepends BOS only
  if that leaves room.
- ``separate`` (ours): prompt and answer are tokenised separately, so the label mask is exactly
  the answer's tokens: ``BOS + prompt`` is at most ``max_prompt_len`` tokens (the prompt cut
  from the left: it keeps the question and the "Answer:" cue that close every prompt),
  ``answer + EOS`` at most ``max_answer_len`` (the answer keeps its beginning and still ends
  with EOS), and generation uses the same prompt budget. A SentencePiece tokenizer then puts
  a word-boundary piece before the answer that the model never sees at inference.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

SPLITS = ("train", "eval", "test")
TOKENIZATIONS = ("trace", "separate")
IGNORE_INDEX = -100  # label value the causal-LM loss skips
_FIELDS = ("prompt", "answer")

log = logging.getLogger(__name__)


class TraceDataError(ValueError):
    """A TRACE split file is missing or malformed; the message names the file and record."""


@dataclass(frozen=True)
class TraceExample:
    prompt: str
    answer: str


def split_path(task_dir: str | Path, split: str) -> Path:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return Path(task_dir) / f"{split}.json"


def _parse_record(path: Path, index: int, record) -> TraceExample:
    if not isinstance(record, dict):
        raise TraceDataError(
            f"{path}: record {index} is {type(record).__name__}, expected an object with 'prompt' and 'answer'"
        )
    for field in _FIELDS:
        if field not in record:
            raise TraceDataError(f"{path}: record {index} has no {field!r} key")
        if not isinstance(record[field], str):
            raise TraceDataError(f"{path}: record {index} {field!r} is {type(record[field]).__name__}, expected str")
    return TraceExample(prompt=record["prompt"], answer=record["answer"])


def load_split(task_dir: str | Path, split: str) -> list[TraceExample]:
    """The records of one split; raises :class:`TraceDataError` naming the file and record."""
    path = split_path(task_dir, split)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceDataError(f"{path}: file not found") from None
    except UnicodeDecodeError as error:
        raise TraceDataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        records = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceDataError(f"{path}: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    if not isinstance(records, list):
        raise TraceDataError(f"{path}: not a JSON list (top level is {type(records).__name__})")
    if not records:
        raise TraceDataError(f"{path}: the list has no records")
    return [_parse_record(path, index, record) for index, record in enumerate(records)]


@dataclass(frozen=True)
class LengthLimits:
    """Token budgets (TRACE: 1024 and 512) and how they apply (``tokenization``, see above)."""

    max_prompt_len: int = 1024
    max_answer_len: int = 512
    tokenization: str = "trace"

    def __post_init__(self):
        if self.max_prompt_len < 1 or self.max_answer_len < 1:
            raise ValueError(
                "max_prompt_len and max_answer_len must be >= 1 (they include BOS and EOS), "
                f"got {self.max_prompt_len} and {self.max_answer_len}"
            )
        if self.tokenization not in TOKENIZATIONS:
            raise ValueError(f"unknown tokenization {self.tokenization!r}; choose one of {TOKENIZATIONS}")


@dataclass(frozen=True)
class EncodedExample:
    input_ids: list[int]
    labels: list[int]  # IGNORE_INDEX on BOS and prompt


def prepare_tokenizer(tokenizer):
    """Check that ``tokenizer`` has BOS and EOS; when it has no pad token, use EOS (safe: the
    attention mask hides padding and its labels are ignored). Sets left padding and
    truncation, as TRACE does, for any caller that pads with the tokenizer itself.
    Returns the same tokenizer."""
    _special_id(tokenizer, "bos")
    _special_id(tokenizer, "eos")
    if tokenizer.pad_token_id is None:
        log.info("tokenizer has no pad token; padding with EOS %r", tokenizer.eos_token)
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    tokenizer.truncation_side = "left"
    return tokenizer


def _token_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _special_id(tokenizer, role: str) -> int:
    token_id = getattr(tokenizer, f"{role}_token_id")
    if token_id is None:
        raise ValueError(
            f"{type(tokenizer).__name__} has no {role.upper()} token; TRACE sequences are BOS + prompt + answer + EOS"
        )
    return token_id


def _trace_tokenize(ids: list[int], limit: int, bos: int | None = None, eos: int | None = None) -> list[int]:
    """TRACE's ``DataCollator.tokenize`` on already tokenised text: keep the last ``limit`` ids, then
    append EOS and prepend BOS, each only while the sequence is shorter than ``limit``."""
    ids = ids[-limit:]
    if eos is not None and len(ids) < limit:
        ids = [*ids, eos]
    if bos is not None and len(ids) < limit:
        ids = [bos, *ids]
    return ids


def encode_prompt(tokenizer, prompt: str, limits: LengthLimits = LengthLimits()) -> list[int]:
    """``BOS + prompt`` for generation, the prompt cut from the left to fit ``max_prompt_len``."""
    prompt_ids, bos = _token_ids(tokenizer, prompt), _special_id(tokenizer, "bos")
    if limits.tokenization == "trace":
        return _trace_tokenize(prompt_ids, limits.max_prompt_len, bos=bos)
    kept = limits.max_prompt_len - 1  # one slot is BOS
    return [bos] + (prompt_ids[-kept:] if kept else [])


def encode_for_training(tokenizer, example: TraceExample, limits: LengthLimits = LengthLimits()) -> EncodedExample:
    """``BOS + prompt + answer + EOS`` with labels on the answer and EOS (see the module doc)."""
    bos, eos = _special_id(tokenizer, "bos"), _special_id(tokenizer, "eos")
    if limits.tokenization == "trace":
        limit = limits.max_prompt_len + limits.max_answer_len
        input_ids = _trace_tokenize(_token_ids(tokenizer, example.prompt + example.answer), limit, bos, eos)
        label_len = len(_trace_tokenize(_token_ids(tokenizer, example.answer), limit, eos=eos))
        masked = max(0, len(input_ids) - label_len)
        return EncodedExample(input_ids=input_ids, labels=[IGNORE_INDEX] * masked + input_ids[masked:])
    prompt_ids = encode_prompt(tokenizer, example.prompt, limits)
    answer_ids = _token_ids(tokenizer, example.answer)[: limits.max_answer_len - 1] + [eos]
    return EncodedExample(
        input_ids=prompt_ids + answer_ids,
        labels=[IGNORE_INDEX] * len(prompt_ids) + answer_ids,
    )
