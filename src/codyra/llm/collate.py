"""Left-padded batches of TRACE examples, for training and for generation.

Decoder-only generation appends tokens on the right, so every row must end with its last
real token: padding goes on the left (as in TRACE). Padding positions get attention mask
0 and label ``IGNORE_INDEX``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from codyra.trace.data import (
    IGNORE_INDEX,
    LengthLimits,
    TraceExample,
    encode_for_training,
    encode_prompt,
    prepare_tokenizer,
)


def left_pad(rows: Sequence[Sequence[int]], pad_value: int, multiple_of: int = 1) -> torch.Tensor:
    """Stack rows into a [batch, length] tensor, padding on the left to the longest row
    rounded up to ``multiple_of``."""
    longest = max(len(row) for row in rows)
    length = -(-longest // multiple_of) * multiple_of
    return torch.tensor([[pad_value] * (length - len(row)) + list(row) for row in rows])


def left_padded_inputs(
    rows: Sequence[Sequence[int]], pad_token_id: int, multiple_of: int = 1
) -> dict[str, torch.Tensor]:
    """``input_ids`` and ``attention_mask`` of token rows padded on the left."""
    return {
        "input_ids": left_pad(rows, pad_token_id, multiple_of),
        "attention_mask": left_pad([[1] * len(row) for row in rows], 0, multiple_of),
    }


@dataclass
class _LeftPaddingCollator:
    tokenizer: object
    limits: LengthLimits = field(default_factory=LengthLimits)
    pad_to_multiple_of: int = 1

    def __post_init__(self):
        prepare_tokenizer(self.tokenizer)

    def _pad(self, rows: Sequence[Sequence[int]], pad_value: int) -> torch.Tensor:
        return left_pad(rows, pad_value, self.pad_to_multiple_of)

    def _inputs(self, input_ids: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        return left_padded_inputs(input_ids, self.tokenizer.pad_token_id, self.pad_to_multiple_of)


class TrainingCollator(_LeftPaddingCollator):
    """``collate_fn`` for training: ``input_ids``, ``attention_mask`` and ``labels``."""

    def __call__(self, examples: Sequence[TraceExample]) -> dict[str, torch.Tensor]:
        encoded = [encode_for_training(self.tokenizer, e, self.limits) for e in examples]
        batch = self._inputs([e.input_ids for e in encoded])
        batch["labels"] = self._pad([e.labels for e in encoded], IGNORE_INDEX)
        return batch


class GenerationCollator(_LeftPaddingCollator):
    """``collate_fn`` for generation: ``BOS + prompt`` as ``input_ids`` and ``attention_mask``."""

    def __call__(self, examples: Sequence[TraceExample]) -> dict[str, torch.Tensor]:
        return self._inputs([encode_prompt(self.tokenizer, e.prompt, self.limits) for e in examples])
