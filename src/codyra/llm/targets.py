"""The adaptable matrices of a Hugging Face causal LM: q, k, v, o, gate, up, down projections.

Names follow the LLaMA / Gemma / Mistral / Qwen decoder layout in ``transformers``
(``model.layers.{i}.self_attn.q_proj``, ``model.layers.{i}.mlp.gate_proj``, ...). Each
projection is its own ``nn.Linear``, so a target is always a whole matrix (no fused row
blocks as in CLIP) and ``attach_adapters`` wraps it in a ``LoRALinear``. Not adapted:
embeddings, norms and ``lm_head`` (as in TRACE's and TreeLoRA's LoRA setups).
"""

from __future__ import annotations

from codyra.adapters.targets import PlacementVocabulary, Target

ATTN_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_KINDS = ("gate_proj", "up_proj", "down_proj")
LM_VOCABULARY = PlacementVocabulary(towers=("lm",), groups={"attn": ATTN_KINDS, "mlp": MLP_KINDS})


def lm_targets(model) -> list[Target]:
    from torch import nn  # here: config validation reads LM_VOCABULARY without torch

    kinds = LM_VOCABULARY.kinds
    targets = [
        Target(path, f"{path}.weight", None, module.in_features, module.out_features, "lm", path.rpartition(".")[2])
        for path, module in model.named_modules()
        if isinstance(module, nn.Linear) and path.rpartition(".")[2] in kinds
    ]
    if not targets:
        raise ValueError(
            f"found no nn.Linear named {', '.join(kinds)} in this {type(model).__name__}; codyra adapts "
            "decoder-only transformers with LLaMA-style projection names (LLaMA, Gemma, Mistral, Qwen)"
        )
    return targets
