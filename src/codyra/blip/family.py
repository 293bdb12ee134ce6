"""The BLIP family: Hugging Face BLIP image-text models classified like CLIP (class prompts, the
MTIL / X-TAIL templates and label spaces), through CLIP's interface (:mod:`codyra.blip.model`).

Heavy modules (torch, transformers) are imported inside the methods: config validation reads
``vocabulary`` on every Snakemake start.
"""

from __future__ import annotations

from typing import ClassVar

from codyra.blip.targets import BLIP_VOCABULARY


class BlipFamily:
    name = "blip"
    vocabulary = BLIP_VOCABULARY
    batch_keys = ("images", "labels")  # as CLIP's
    train_rule = "train_task"  # a task takes what a CLIP task takes: CLIP's resources
    eval_rule = "eval_row"
    cluster_job = "run"
    rows_apart = False  # training and a row use one GPU each
    classifies = True
    has_heldout_tasks = False  # the paper's BLIP table reports the stream's Transfer / Average / Last only
    inapplicable_analyses: ClassVar[dict[str, str]] = {
        name: f"the paper reports it for CLIP only ({why})"
        for name, why in (
            ("probes", "interpolation on unseen zero-shot data, removal of one encoder's updates"),
            ("conflict", "gradients at the pretrained CLIP, appendix supp_norm_matched"),
        )
    }

    means_table = "blip"  # the paper's "Averaged performance using BLIP" (appendix, Evaluation with Other VLMs)
    libraries = ("torchvision", "transformers.models.blip.modeling_blip")

    def settings(self, cfg: dict) -> dict:
        return {"blip": cfg["blip"]}

    def pretrained(self, cfg: dict):
        from codyra.blip.model import pretrained_blip

        return pretrained_blip(cfg)

    def rebuild(self, cfg: dict, method: str, seed: int, upto: int):
        from codyra.blip.rebuild import rebuild_blip

        return rebuild_blip(cfg, method, seed, upto)

    def targets(self, model):
        from codyra.blip.targets import blip_targets

        return blip_targets(model)

    def fit_session(self, cfg, job, method_name, seed, task_index, device):
        from codyra.blip.train import BlipSession

        return BlipSession(cfg, job, method_name, seed, task_index, device)

    def delegate(self, cfg, method_name, seed, task_index, run):
        return None  # a BLIP task trains in this process

    def feature_pass(self, cfg, seed, task_index, train, device, model=None):
        from codyra.blip.model import pretrained_blip
        from codyra.clip.features import task_feature_batches

        return task_feature_batches(cfg, seed, task_index, train, device, model=model, pretrained=pretrained_blip)

    def cells(self, cfg, row, device):
        from codyra.blip.model import pretrained_blip
        from codyra.blip.rebuild import rebuild_blip
        from codyra.clip.evaluate import clip_cells

        return clip_cells(cfg, row, device, pretrained=pretrained_blip, rebuild=rebuild_blip)

    def own_pretraining(self, cfg: dict) -> str | None:
        from codyra.clip.weights import own_weights

        return own_weights(cfg)  # the mini benchmark's BLIP (codyra.mini.blip), else None: a released BLIP


BLIP = BlipFamily()
