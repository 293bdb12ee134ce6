"""The BLIP side of training one task: CLIP's session (:class:`codyra.clip.train.ClipSession`:
image->text cross-entropy over the task's class prompts, scaled by the model's logit scale) on
theta_{i-1} of a BLIP run, whose image tower is ``vision_model``."""

from __future__ import annotations

from codyra.blip.rebuild import rebuild_blip
from codyra.blip.targets import VISION_PREFIX
from codyra.clip.train import ClipSession


class BlipSession(ClipSession):
    vision_prefix = VISION_PREFIX

    @staticmethod
    def rebuild(cfg: dict, method: str, seed: int, upto: int):
        return rebuild_blip(cfg, method, seed, upto)
