"""LwF-VR (Ding et al., "Don't stop learning"), as ZSCL's MTIL code runs it
(Thunderbeee/ZSCL, mtil/scripts/lwf_vr.sh, ``--ref-sentences random``): LwF whose
distillation texts are a "virtual vocabulary" of random token sequences instead of the
task's class prompts (mtil/src/models/helpers.py, ``virtual_vocab``), drawn once per task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def random_vocabulary(
    count: int,
    length: int,
    vocab_size: int,
    sot: int,
    eot: int,
    context_length: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``count`` token rows [SOT, ``length`` ids uniform in [0, vocab_size), EOT, 0 ...] of
    ``context_length`` tokens (ZSCL: 1,000 rows of 10 ids, 77 tokens). As in ZSCL the ids
    range over the whole vocabulary, special tokens included."""
    import torch

    if length + 2 > context_length:
        raise ValueError(
            f"random vocabulary rows of {length} tokens need {length + 2} positions with SOT and EOT; "
            f"the text encoder's context length is {context_length}: lower the method's vocabulary_length"
        )
    words = torch.randint(0, vocab_size, (count, length), generator=generator)
    start = torch.full((count, 1), sot, dtype=words.dtype)
    end = torch.full((count, 1), eot, dtype=words.dtype)
    pad = torch.zeros((count, context_length - length - 2), dtype=words.dtype)
    return torch.cat([start, words, end, pad], dim=1)
