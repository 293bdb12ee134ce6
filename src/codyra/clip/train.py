"""The CLIP side of training one task (the loop is :mod:`codyra.training.loop`).

Supervised loss (paper setup): image->text cross-entropy over the current task's classes,
prompts built with the task's first template, logits scaled by the model's logit scale.
``loss: official`` adds the official code's text->image term. AdamW with the schedule of
``train.lr_schedule`` (cosine by default, optional linear warm-up) per optimizer step;
``train.precision`` picks fp32 (the released code) or bf16 autocast on a GPU. Batches of augmented
images are pure functions of (seed, task, step) (:class:`codyra.steps.batches.StepBatches` keys,
read by DataLoader workers).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from codyra.clip.rebuild import rebuild_clip
from codyra.clip.streams import build_tasks
from codyra.clip.zeroshot import encode_prompts
from codyra.device import autocast, pick_device
from codyra.steps.backends import PlainBackend
from codyra.steps.batches import StepBatches


def supervised_loss(logits, labels, variant: str, seen_classes: int = 0, image_trains: bool = True):
    """Image->text cross-entropy of ``logits`` (batch, classes) over the current task's classes
    (``paper``); ``official`` adds the released code's text->image term (Artificer-AI-Lab/CoDyRA,
    models/codyra.py, train_model).

    That term is a cross-entropy of the text->image logits, one row per class prompt the released
    code builds (the ``seen_classes`` prompts of earlier tasks, then the current ones), against the
    unnormalised 0/1 mask "image b has class c", averaged over all those rows. A row without an
    image in the batch (every seen class) contributes 0 but counts in the mean, so only the current
    rows are computed. The released code adds it only when the image tower is adapted
    (target_encoder vision or all): ``image_trains``.
    """
    loss = F.cross_entropy(logits, labels)
    if variant == "official" and image_trains:
        classes = torch.arange(logits.shape[1], device=labels.device)
        mask = (classes[:, None] == labels[None, :]).to(logits.dtype)  # (classes, batch)
        rows = -(mask * logits.T.log_softmax(dim=1)).sum(dim=1)
        loss = loss + rows.sum() / (seen_classes + logits.shape[1])
    return loss


class ClipSession:
    """One CLIP training job: theta_{i-1} on the device, the task's images and class prompts."""

    dropout_key = ()  # CLIP's dropout seeds predate ranks: (seed, task, step)
    vision_prefix = "visual."  # the parameters of the image tower

    def __init__(self, cfg: dict, job: dict, method_name: str, seed: int, task_index: int, device):
        self.cfg, self.hp, self.seed, self.task_index = cfg, job["train"], seed, task_index
        self.device = pick_device(device)
        bundle = self.rebuild(cfg, method_name, seed, task_index - 1)
        tasks = build_tasks(cfg, bundle.image, seed, self.hp["augmentation"])
        self.task = tasks[task_index - 1]
        self.seen_classes = sum(t.num_classes for t in tasks[: task_index - 1])  # the official loss's seen rows
        self.model, self.tokenizer = bundle.model.to(self.device), bundle.tokenizer
        self.total = self.hp["iterations"]
        self.train_set = self.task.train_set()  # checks the images exist before the model trains
        self.steps_per_epoch = math.ceil(len(self.train_set) / self.hp["batch_size"])
        self.micro_batches_per_step, self.micro_batches_per_epoch = 1, self.steps_per_epoch  # a step is one batch
        self.description = f"{cfg['benchmark']}/{method_name}/seed{seed}/task{task_index} {self.task.name}"
        self._teacher_text: dict[int, torch.Tensor] = {}
        # set here, not with the backend: a method's setup may run the model on a batch (InfLoRA)
        self.prompts = self.task.prompts(self.task.templates[0])
        self.tokens = self.tokenizer(self.prompts).to(self.device)
        self.fixed_text = None  # the class-prompt features, once the backend knows the text tower is frozen
        self.logit_scale = self.model.logit_scale.exp().detach()

    @staticmethod
    def rebuild(cfg: dict, method: str, seed: int, upto: int):
        """theta_upto, the family's bundle (``model``, ``tokenizer``, ``image``)."""
        return rebuild_clip(cfg, method, seed, upto)

    def backend(self, groups, method):
        model = self.model.to(self.device).train()
        backend = PlainBackend(model, groups, self.hp, self.device)
        vision = self.vision_prefix
        text_trains = any(p.requires_grad for n, p in model.named_parameters() if not n.startswith(vision))
        self.image_trains = any(p.requires_grad for n, p in model.named_parameters() if n.startswith(vision))
        if not text_trains:
            with torch.no_grad(), autocast(self.device, self.hp["precision"]):
                self.fixed_text = encode_prompts(model, self.tokenizer, self.prompts, self.device)
        return backend

    def batches(self, start: int):
        dataset = self.train_set
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_sampler=StepBatches(
                len(dataset), self.hp["batch_size"], self.seed, self.task_index, start, self.total
            ),
            num_workers=self.cfg["data"]["num_workers"],
            pin_memory=self.device.type == "cuda",
        )
        for images, labels in loader:
            yield [
                {
                    "images": images.to(self.device, non_blocking=True),
                    "labels": labels.to(self.device, non_blocking=True),
                }
            ]

    def _text(self, model) -> tuple[torch.Tensor, torch.Tensor]:
        """(class-prompt features, logit scale) of ``model``: the trained model's, or a frozen
        teacher's (computed once)."""
        if model is self.model:
            text = (
                self.fixed_text
                if self.fixed_text is not None
                else F.normalize(model.encode_text(self.tokens).float(), dim=-1)
            )
            return text, self.logit_scale
        if id(model) not in self._teacher_text:
            with torch.no_grad():
                self._teacher_text[id(model)] = F.normalize(model.encode_text(self.tokens).float(), dim=-1)
        return self._teacher_text[id(model)], model.logit_scale.exp().detach()

    def forward(self, model, batch: dict) -> dict:
        image = F.normalize(model.encode_image(batch["images"]).float(), dim=-1)
        text, scale = self._text(model)
        return {"logits": scale * image @ text.T, "image_features": image, "text_features": text}

    def task_loss(self, batch: dict, outputs: dict) -> torch.Tensor:
        return supervised_loss(
            outputs["logits"], batch["labels"], self.hp["loss"], self.seen_classes, self.image_trains
        )

    def begin_step(self, micro_batches: list[dict]) -> None:
        """Nothing to prepare: a CLIP step is one batch."""

    def step_loss(self, batch: dict, outputs: dict) -> torch.Tensor:
        self._loss = self.task_loss(batch, outputs)
        return self._loss

    def step_record(self) -> dict:
        return {"loss": self._loss.detach()}

    def trained_model(self):
        return self.model

    def keeps_model(self) -> bool:
        return True
