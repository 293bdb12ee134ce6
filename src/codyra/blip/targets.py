"""The adaptable matrices of a Hugging Face BLIP image-text model: Q, K, V, O, FC, Proj of
every block of both towers, CLIP's vocabulary.

Vision tower (``vision_model.encoder.layers.{i}``): Q, K and V are the three row blocks of the
fused ``self_attn.qkv`` Linear, O is ``self_attn.projection``, FC / Proj are ``mlp.fc1`` /
``mlp.fc2``. Text tower (the BERT encoder ``text_encoder.encoder.layer.{i}``): ``attention.self.
query / key / value``, ``attention.output.dense`` (O), ``intermediate.dense`` (FC) and
``output.dense`` (Proj). Not adapted, as in CLIP: the projections ``vision_proj`` / ``text_proj``,
LayerNorms, embeddings; nor what the contrastive features never run through (the text
encoder's cross-attention to the image, the matching head ``itm_head``).
"""

from __future__ import annotations

import re

from codyra.adapters.targets import PlacementVocabulary, Target

BLIP_VOCABULARY = PlacementVocabulary(
    towers=("vision", "text"),
    groups={"attn": ("q", "k", "v", "o"), "mlp": ("fc", "proj")},
)
VISION_PREFIX = "vision_model."  # parameters of the image tower
_VISION = re.compile(r"vision_model\.encoder\.layers\.\d+\.(self_attn\.projection|mlp\.fc1|mlp\.fc2)")
_TEXT = re.compile(
    r"text_encoder\.encoder\.layer\.\d+\."
    r"(attention\.self\.query|attention\.self\.key|attention\.self\.value|attention\.output\.dense"
    r"|intermediate\.dense|output\.dense)"
)
KINDS = {
    "self_attn.projection": "o",
    "mlp.fc1": "fc",
    "mlp.fc2": "proj",
    "attention.self.query": "q",
    "attention.self.key": "k",
    "attention.self.value": "v",
    "attention.output.dense": "o",
    "intermediate.dense": "fc",
    "output.dense": "proj",
}


def blip_targets(model) -> list[Target]:
    from torch import nn  # here: config validation reads BLIP_VOCABULARY without torch

    targets = []
    for path, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        if path.startswith(VISION_PREFIX) and path.endswith(".self_attn.qkv"):
            e = module.in_features
            for block, kind in enumerate(("q", "k", "v")):
                targets.append(
                    Target(f"{path}.{kind}", f"{path}.weight", (block * e, (block + 1) * e), e, e, "vision", kind)
                )
            continue
        match = _VISION.fullmatch(path) or _TEXT.fullmatch(path)
        if match:
            tower = "vision" if path.startswith(VISION_PREFIX) else "text"
            kind = KINDS[match.group(1)]
            targets.append(Target(path, f"{path}.weight", None, module.in_features, module.out_features, tower, kind))
    if not targets:
        raise ValueError(
            f"found no BLIP attention or MLP Linear in this {type(model).__name__}; codyra adapts "
            "transformers' BlipForImageTextRetrieval (vision_model.encoder.layers, text_encoder.encoder.layer)"
        )
    return targets
