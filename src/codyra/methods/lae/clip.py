"""The CLIP side of LAE (:mod:`codyra.methods.lae.method`): where its PETs sit in an open_clip model
and the evaluation's ensemble of the online and the offline model.

The reference's ViT gets a ``KVLoRA`` on the fused ``qkv`` of blocks 0-4 (gqk/LAE main.py
``attach_pets_vit``: ``blocks[b].attn.attach_adapter(qkv=...)`` for ``adapt_blocks``): here the key
and value rows of ``in_proj_weight`` of the image encoder's first ``blocks`` residual blocks.

Its inference (main.py ``eval_epoch``) takes, per test image, the element-wise maximum of the two
models' softmax over the classes. On CLIP a model's logits are the logit-scaled cosines of its image
features with the class-prompt classifier, which the frozen text encoder builds once for both: the
evaluation computes the cosines (:func:`codyra.clip.evaluate.class_scores`) and hands them to the
ensemble that :func:`attach_ensemble` puts on the model (``combine_class_scores``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from codyra.adapters.attach import attach_adapters
from codyra.adapters.targets import PlacementVocabulary, Target, select_targets
from codyra.clip.targets import clip_targets
from codyra.methods.base import freeze
from codyra.methods.lae.pet import FACTORS, LAELoRA, ensemble_probabilities


def lae_targets(targets: list[Target], vocab: PlacementVocabulary, blocks: int) -> list[Target]:
    """The key and value matrices of the image encoder's residual blocks 0..blocks-1."""
    globs = [f"visual.*.resblocks.{b}.*" for b in range(blocks)]
    chosen = select_targets(targets, ["vision", "k", "v", *globs], vocab)
    present = {t.name.split(".resblocks.")[1].split(".")[0] for t in chosen}
    if len(present) < blocks:
        raise ValueError(
            f"LAE's blocks: {blocks} asks for more image-encoder blocks than this model has ({len(present)}); "
            f"set blocks to at most {len(present)}"
        )
    return chosen


class OnlineOfflineEnsemble:
    """LAE's inference on CLIP: ``combine_class_scores(cosine)`` runs the image encoder once with the
    online PETs and once with the offline ones (``cosine(encode)`` gives the fp32 cosines of
    ``encode``'s image features with the classifier) and returns the maximum of their softmax."""

    def __init__(self, model: torch.nn.Module, adapters: list[LAELoRA]):
        self.model, self.adapters = model, adapters

    def _use(self, offline: bool) -> None:
        for adapter in self.adapters:
            adapter.use_offline = offline

    def __call__(self, cosine: Callable[[Callable], torch.Tensor]) -> torch.Tensor:
        scale = self.model.logit_scale.exp().float()
        try:
            self._use(False)
            online = scale * cosine(self.model.encode_image)
            self._use(True)
            offline = scale * cosine(self.model.encode_image)
        finally:
            self._use(False)  # encode_image alone is the online model's (probes, features)
        return ensemble_probabilities(online, offline)


def attach_ensemble(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """theta_0 with a task's stored PETs attached: the online ones answer ``encode_image``; once the
    state holds offline ones (task 2 on), ``model.combine_class_scores`` is their ensemble."""
    targets = [t for t in clip_targets(model) if f"online.{t.name}.A" in state]
    if not targets or len(targets) != sum(1 for k in state if k.startswith("online.") and k.endswith(".A")):
        raise ValueError(
            f"LAE's stored PETs {sorted(state)[:4]}... do not match this model's matrices: rerun the training"
        )
    freeze(model)
    adapters = {}
    for t in targets:
        online = [state[f"online.{t.name}.{f}"] for f in FACTORS]
        adapter = LAELoRA(t.in_features, t.out_features, online[0].shape[0], float(online[2]))
        with torch.no_grad():
            for p, value in zip(adapter.online(), online, strict=True):
                p.copy_(value)
        if f"offline.{t.name}.A" in state:
            adapter.set_offline([state[f"offline.{t.name}.{f}"] for f in FACTORS])
        adapters[t.name] = adapter.requires_grad_(False)
    attach_adapters(model, targets, adapters)
    if all(a.offline() is not None for a in adapters.values()):
        model.combine_class_scores = OnlineOfflineEnsemble(model, list(adapters.values()))
    return model
