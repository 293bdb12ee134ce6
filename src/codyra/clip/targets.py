"""The adaptable matrices of an open_clip CLIP: Q, K, V, O, FC, Proj of every block.

Not adapted (as in the official code): ``visual.proj``, ``text_projection``, LayerNorms,
embeddings and ``logit_scale``.
"""

from __future__ import annotations

from codyra.adapters.targets import PlacementVocabulary, Target

CLIP_VOCABULARY = PlacementVocabulary(
    towers=("vision", "text"),
    groups={"attn": ("q", "k", "v", "o"), "mlp": ("fc", "proj")},
)


_KIND_OF_LEAF = {"q": "q", "k": "k", "v": "v", "o": "o", "c_fc": "fc", "c_proj": "proj"}


def stored_target(name: str, param: str, rows) -> Target:
    """The Target a stored update names (its name, parameter and row block; sizes unknown, 0):
    tower and kind read from the name as :func:`clip_targets` writes it."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf not in _KIND_OF_LEAF:
        raise ValueError(f"stored update target {name!r} is not a CLIP target name (Q, K, V, O, FC or Proj of a block)")
    tower = "vision" if param.startswith("visual.") else "text"
    return Target(name, param, None if rows is None else tuple(rows), 0, 0, tower, _KIND_OF_LEAF[leaf])


def clip_targets(model) -> list[Target]:
    from torch import nn

    targets = []
    for path, module in model.named_modules():
        tower = "vision" if path.startswith("visual.") else "text"
        if isinstance(module, nn.MultiheadAttention) and ".resblocks." in path:
            e = module.embed_dim
            for block, kind in enumerate(("q", "k", "v")):
                targets.append(
                    Target(f"{path}.{kind}", f"{path}.in_proj_weight", (block * e, (block + 1) * e), e, e, tower, kind)
                )
            targets.append(Target(f"{path}.o", f"{path}.out_proj.weight", None, e, e, tower, "o"))
        elif isinstance(module, nn.Linear) and path.endswith((".mlp.c_fc", ".mlp.c_proj")):
            kind = "fc" if path.endswith("c_fc") else "proj"
            targets.append(Target(path, f"{path}.weight", None, module.in_features, module.out_features, tower, kind))
    if not targets:
        raise ValueError(
            "found no nn.MultiheadAttention / mlp.c_fc / mlp.c_proj in this model; codyra adapts open_clip "
            "CLIP models built with the default residual attention blocks"
        )
    return targets
