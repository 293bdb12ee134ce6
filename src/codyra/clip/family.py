"""The CLIP family: what the engine, the evaluation and the workflow ask of an open_clip model.

Heavy modules (open_clip, torchvision) are imported inside the methods: config validation
reads ``vocabulary`` on every Snakemake start.
"""

from __future__ import annotations

from typing import ClassVar

from codyra.clip.targets import CLIP_VOCABULARY
from codyra.clip.weights import own_weights


class ClipFamily:
    name = "clip"
    vocabulary = CLIP_VOCABULARY
    batch_keys = ("images", "labels")  # augmented images (B, 3, H, W), class indices within the task
    train_rule = "train_task"
    eval_rule = "eval_row"
    cluster_job = "run"  # a task takes minutes on one GPU: per-task jobs would spend more on queueing and start-up
    rows_apart = False  # training and a row use one GPU each
    classifies = True
    has_heldout_tasks = True
    inapplicable_analyses: ClassVar[dict[str, str]] = {}
    means_table = None  # the CLIP tables are Table 1's layout (codyra.evaluation.tables)
    libraries = ("torchvision", "open_clip")

    def settings(self, cfg: dict) -> dict:
        return {}

    def pretrained(self, cfg: dict):
        from codyra.clip.model import pretrained_clip

        return pretrained_clip(cfg)

    def rebuild(self, cfg: dict, method: str, seed: int, upto: int):
        from codyra.clip.rebuild import rebuild_clip

        return rebuild_clip(cfg, method, seed, upto)

    def targets(self, model):
        from codyra.clip.targets import clip_targets

        return clip_targets(model)

    def fit_session(self, cfg, job, method_name, seed, task_index, device):
        from codyra.clip.train import ClipSession

        return ClipSession(cfg, job, method_name, seed, task_index, device)

    def delegate(self, cfg, method_name, seed, task_index, run):
        return None  # a CLIP task trains in this process

    def feature_pass(self, cfg, seed, task_index, train, device, model=None):
        from codyra.clip.features import task_feature_batches

        return task_feature_batches(cfg, seed, task_index, train, device, model=model)

    def cells(self, cfg, row, device):
        from codyra.clip.evaluate import clip_cells

        return clip_cells(cfg, row, device)

    def own_pretraining(self, cfg: dict) -> str | None:
        return own_weights(cfg)


CLIP = ClipFamily()
