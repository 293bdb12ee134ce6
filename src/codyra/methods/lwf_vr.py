"""LwF-VR (Ding et al., "Don't stop learning"), as ZSCL's MTIL code runs it
(Thunderbeee/ZSCL, mtil/scripts/lwf_vr.sh, ``--ref-sentences random``): LwF whose
distillation texts are a "virtual vocabulary" of random token sequences instead of the
task's class prompts (mtil/src/models/helpers.py, ``virtual_vocab``), drawn once per task.

ZSCL draws it with torch's global generator (``torch.randint``, helpers.py line 56), which
mtil/src/main.py seeds at its start (line 23, ``utils.seed_all(args.seed)``, ``--seed``
default 42, never set by the scripts); every task runs as a new process, so every task draws
the same vocabulary. Here it comes from a generator seeded with ``vocabulary_seed`` (42) at
every task, so every task and every run seed uses the same rows, as in ZSCL; they are not
ZSCL's very tokens (its global generator has served model and loader initialisation first).
``vocabulary_seed: null`` draws a vocabulary per (seed, task) instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.lwf import LwF, LwFOptions
from codyra.methods.options import option

if TYPE_CHECKING:
    import torch

# texts encoded per teacher forward when the vocabulary is encoded once per task
ENCODE_CHUNK = 256


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


@dataclass(frozen=True)
class LwFVROptions(LwFOptions):
    vocabulary_size: int = option(1000, minimum=1, doc="random token rows (ZSCL virtual_vocab n_class)")
    vocabulary_length: int = option(10, minimum=1, doc="random tokens per row (ZSCL virtual_vocab length)")
    vocabulary_seed: int | None = option(
        42,
        minimum=0,
        doc="seed of the vocabulary's generator at every task (ZSCL: main.py seed_all(42)); null: per (seed, task)",
    )


class LwFVR(LwF):
    """LwF over a random vocabulary: the teacher's features of the random rows replace the
    class-prompt features (encoded once per task: the teacher theta_{i-1} is frozen)."""

    kind = "lwf_vr"
    families = ("clip",)
    paper_row = "LwF-VR"
    Options = LwFVROptions

    def setup(self, ctx):
        import torch

        from codyra.methods._distillation.clip import text_embeddings, token_space

        groups = super().setup(ctx)
        o, teacher = self.options, self.teacher
        sot, eot, vocab_size, context_length = token_space(teacher, ctx.cfg["model"]["name"])
        generator = ctx.generator if o.vocabulary_seed is None else torch.Generator().manual_seed(o.vocabulary_seed)
        rows = random_vocabulary(
            o.vocabulary_size, o.vocabulary_length, vocab_size, sot, eot, context_length, generator
        ).to(ctx.device)
        with torch.no_grad():
            self.vocabulary_features = text_embeddings(teacher, rows, ENCODE_CHUNK)
        return groups

    def teacher_text(self, teacher_outputs):
        return self.vocabulary_features


METHOD = LwFVR
