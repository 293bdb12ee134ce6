"""Adapted matrices ("targets") and the placement grammar that selects them.

A target is one weight matrix, or one row block of a fused matrix (Q, K and V are the
three row blocks of ``nn.MultiheadAttention.in_proj_weight``). Targets are named after
the backbone's own parameter paths so stored updates can be applied to a freshly built
backbone by name.

Placement (config key ``placement``) is a token or a list of tokens:
- ``all``: every target;
- tower tokens (``vision``, ``text`` for CLIP) restrict the tower;
- module tokens restrict the matrix kind: groups ``attn`` / ``mlp`` or single kinds
  (CLIP: ``q k v o fc proj``; causal LMs: ``q_proj ... down_proj``);
- anything containing ``.`` or ``*`` is a glob over target names.
The selection is (tower tokens) AND (module tokens) AND (globs), each axis unrestricted
when it has no token, e.g. ``[vision, attn]`` = Q, K, V, O of the vision encoder.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str  # e.g. "visual.transformer.resblocks.0.attn.q"
    param: str  # backbone parameter holding the matrix, e.g. "...attn.in_proj_weight"
    rows: tuple[int, int] | None  # row block of a fused parameter, None for the whole matrix
    in_features: int
    out_features: int
    tower: str  # "vision" / "text" (CLIP) or "lm"
    kind: str  # "q", "k", "v", "o", "fc", "proj" (CLIP) or "q_proj", ... (LM)


@dataclass(frozen=True)
class PlacementVocabulary:
    """The tokens a model family understands."""

    towers: tuple[str, ...]
    groups: dict[str, tuple[str, ...]]  # e.g. {"attn": ("q", "k", "v", "o"), ...}

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for kinds in self.groups.values() for k in kinds)


def parse_placement(placement, vocab: PlacementVocabulary) -> tuple[set[str], set[str], list[str]]:
    """(towers, kinds, globs) of a placement; a clear error for any token the family does not know."""
    tokens = [placement] if isinstance(placement, str) else list(placement or [])
    if not tokens:
        raise ValueError("placement is empty; use 'all' or a list such as [attn] or [vision, mlp]")
    towers, kinds, globs = set(), set(), []
    for token in tokens:
        if not isinstance(token, str):
            raise ValueError(f"placement tokens must be strings, got {token!r}")  # noqa: TRY004 (a config error)
        if token == "all":
            continue
        if token in vocab.towers:
            towers.add(token)
        elif token in vocab.groups:
            kinds.update(vocab.groups[token])
        elif token in vocab.kinds:
            kinds.add(token)
        elif "." in token or "*" in token:
            globs.append(token)
        else:
            valid = ["all", *vocab.towers, *vocab.groups, *vocab.kinds]
            raise ValueError(
                f"unknown placement token {token!r}; valid tokens: {', '.join(valid)}, "
                "or a glob over target names such as '*.resblocks.11.*'"
            )
    return towers, kinds, globs


def select_targets(targets: list[Target], placement, vocab: PlacementVocabulary) -> list[Target]:
    towers, kinds, globs = parse_placement(placement, vocab)
    chosen = [
        t
        for t in targets
        if (not towers or t.tower in towers)
        and (not kinds or t.kind in kinds)
        and (not globs or any(fnmatch.fnmatchcase(t.name, g) for g in globs))
    ]
    if not chosen:
        raise ValueError(f"placement {placement!r} selects no weight matrix of this model")
    return chosen
