"""DIKI (Tang et al., ECCV 2024; lloongx/DIKI): a frozen CLIP with task-specific key/value prefixes
injected as a residual in the attention of both towers, and distribution-aware calibration at
inference. Defaults: ``configs/MTIL.yaml`` (what ``main.py --config-path configs/MTIL.yaml``
runs, the paper's Table 1), ``DIKI/DIKI.py``, ``clip/attention.py``, ``clip/model.py``.

Per task t (``DIKI.train_one_task``):
1. the frozen model's normalised image embeddings of the task's training images (under the
   evaluation transform, as the reference's CLIP preprocessing) give its Gaussian (mean,
   unbiased covariance + ``covariance_eps`` I);
2. task t's prefix (keys U(-1, 1), values 0: the model starts as the frozen one) in the first
   ``vision_depth`` image blocks and ``text_depth`` text blocks trains on the image->text
   cross-entropy over the task's classes, its prefix attention weighted 1.

Inference (``CustomCLIP.forward`` without task ids): each image's log-likelihood under every
learned task's Gaussian; its best task and weight sigmoid(log-likelihood / ``weight_scale`` -
``weight_shift``); with ``batchwise`` the batch's most frequent best task (ties: the lower) gives
the prefixes of every image of the batch (``eval_batch_size`` images), each image keeping its own
weight, the class prompts the batch's mean weight. The CLIP side:
:mod:`codyra.methods.diki.clip`.

The reference's SGD at lr 5 without momentum (``optim.name: SGD``) is the paper config's
``train.optimizer: sgd``. Where we differ (the config notes the first): the cosine ends at 0 (the
reference's ``build_cosine_scheduler`` at lr x 1e-3); training on the platform's augmented training batches (the
reference applies CLIP's test preprocessing to its training images too); no validation-based choice of the epoch
(``use_validation: True`` keeps the best of 10 epochs on a held-out split); fp32 prefixes (the
reference's are fp16); the likelihood in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method, freeze
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class DIKIOptions(MethodOptions):
    vision_depth: int = option(
        8, minimum=1, doc="image blocks with a prefix, from the first (MTIL.yaml prompt_depth_vision 8)"
    )
    text_depth: int = option(
        8, minimum=0, doc="text blocks with a prefix, from the first (MTIL.yaml prompt_depth_text 8)"
    )
    vision_length: int = option(8, minimum=1, doc="prefix tokens per image block (MTIL.yaml n_ctx_vision 8)")
    text_length: int = option(8, minimum=1, doc="prefix tokens per text block (MTIL.yaml n_ctx_text 8)")
    batchwise: bool = option(
        True, doc="one task's prefixes per test batch, its most frequent best task (MTIL.yaml batchwise_prompt True)"
    )
    eval_batch_size: int = option(
        256,
        minimum=1,
        doc="test images per batch (DIKI.py get_dataloader: optim.batch_size 128 x 2 when batchwise, at test)",
    )
    weight_scale: float = option(
        512.0,
        exclusive_minimum=0,
        doc="calibration: log-likelihood / this (DIKI.py topk / 512, hard-coded: ViT-B/16's embedding dimension)",
    )
    weight_shift: float = option(1.0, doc="calibration: minus this before the sigmoid (DIKI.py topk / 512 - 1.0)")
    covariance_eps: float = option(
        1e-7, exclusive_minimum=0, doc="added to the covariance's diagonal (DIKI.py covar += eye * 1e-7)"
    )


class DIKI(Method):
    kind = "diki"
    families = ("clip",)
    paper_row = "DIKI†"
    group = "complementation"
    predicts_domain = True
    Options = DIKIOptions

    def setup(self, ctx):
        from codyra.methods.diki import clip

        o = self.options
        freeze(ctx.model)
        previous = clip.load_state(ctx.previous_state) if ctx.previous_state else None
        learned = 0 if previous is None else previous.tasks
        if learned != ctx.task_index - 1:
            raise ValueError(f"DIKI's state of task {ctx.task_index - 1} holds {learned} tasks: rerun that task")
        mean, covariance = clip.task_gaussian(ctx, o.covariance_eps)  # the frozen model, before any prefix
        self.previous, self.gaussian = previous, (mean, covariance)
        self.prefixes, self.wrapped = clip.attach_training(ctx.model, o, ctx.generator, ctx.device)
        params = list(self.prefixes.parameters())
        self.trainable = sum(p.numel() for p in params)
        return [{"params": params, "weight_decay": ctx.weight_decay}]

    def finish(self, model):
        from codyra.methods.diki import clip
        from codyra.store.updates import TaskUpdate

        self.state = clip.finish_training(model, self.prefixes, self.wrapped, self.previous, *self.gaussian)
        summary = {
            "trainable_params": self.trainable,
            "stored_params": sum(t.numel() for t in self.state.values()),
            "inference_extra_params": sum(t.numel() for t in self.state.values()),
        }
        return TaskUpdate("none"), summary

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.diki.clip import diki_row

        return row.from_stored_state(diki_row)


METHOD = DIKI
