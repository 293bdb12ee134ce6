"""Zero-shot: the pretrained model, never updated (theta_i = theta_0)."""

from __future__ import annotations

from codyra.methods.base import Method


class ZeroShot(Method):
    kind = "zeroshot"
    families = ("clip", "causal_lm", "blip")
    paper_row = "Zero-shot"
    trains = False
    group = "reference"

    def setup(self, ctx):
        return []

    def finish(self, model):
        from codyra.store.updates import TaskUpdate

        return TaskUpdate("none"), {"trainable_params": 0, "stored_params": 0}


METHOD = ZeroShot
