"""LAE (Gao et al., ICCV 2023; gqk/LAE), its LoRA kind: an online and an offline parameter-efficient
module beside a frozen backbone, the offline one an exponential moving average of the online one,
and inference by the ensemble of the two.

What the reference does (``main.py`` ``MyModule``, ``libml/model/pet/lora.py``, ``config/vit_lora.yaml``
over ``config/base/cifar100_order1.yaml``, the Makefile's default):

- the PET is ``KVLoRA``: a rank-5 LoRA on the key and on the value rows of the fused ``qkv`` of
  ViT blocks 0-4 (``adapt_blocks: [0, 1, 2, 3, 4]``), each ``s * B A`` added to the weight, A
  Kaiming-uniform (a = sqrt 5), B zero, ``s`` a learnable scalar initialised to 1 (``scale: null``
  builds a learnable ``Scaler``); the backbone is frozen;
- the online PET is created once and trains through every task (with the classifier head);
- the offline PET is ``timm.utils.ModelEmaV2(online)``, created when the second task starts (a copy
  of the online PET as task 1 left it: ``setup_model``'s ``len(self.pets_emas) < num_emas``, one EMA),
  then updated after every training step (``post_train_step``):
  ``offline <- decay * offline + (1 - decay) * online`` with ``ema_decay: 0.9999``;
- from the second task on, the online PET is frozen for the first ``num_freeze_epochs: 3`` of
  ``num_epochs: 5`` epochs while the new classifier head warms up (``pre_train_epoch``); the EMA
  still runs;
- inference (``eval_epoch``): the softmax of the online model's logits and that of the offline
  model's, combined by their element-wise maximum (``torch.stack(..).max(-1)``, ``eval_only_emas:
  false``); before the offline PET exists, the online model alone.

On CLIP (the paper's X-TAIL table) the adaptation is minimal: the PET sits in the image encoder's
first five blocks as in the reference ViT (option ``blocks``; :mod:`codyra.methods.lae.clip`); the
classifier is CLIP's text head of class prompts, frozen, instead of a trained linear head, and the
logits are the logit-scaled cosines. As no head warms up, the online PET is not frozen at the
start of a task by default (option ``freeze_fraction``: 0.6 is the reference's 3 of 5 epochs).
The backbone is never changed (the stored update is empty); the task's method state holds the
online and offline PETs, which the next task continues and the evaluation ensembles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codyra.methods.base import Method, freeze
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class LAEOptions(MethodOptions):
    rank: int = option(5, minimum=1, doc="LoRA rank of the key and value PETs (config/vit_lora.yaml pet_kwargs.rank 5)")
    scale: float | None = option(
        None,
        doc="the PETs' scale s in s * B A; null: a learnable scalar initialised to 1 "
        "(config/vit_lora.yaml scale: null, libml/model/misc/scaler.py)",
    )
    blocks: int = option(
        5,
        minimum=1,
        doc="the image encoder's first blocks that get PETs (config/vit_lora.yaml adapt_blocks [0, 1, 2, 3, 4])",
    )
    ema_decay: float = option(
        0.9999,
        exclusive_minimum=0,
        exclusive_maximum=1,
        doc="momentum of the offline PET's EMA, per step (config/base/*.yaml ema_decay 0.9999)",
    )
    freeze_fraction: float = option(
        0.0,
        minimum=0,
        exclusive_maximum=1,
        doc="share of a task's steps (tasks 2..N) during which the online PET is frozen; the reference: 0.6 "
        "(num_freeze_epochs 3 of num_epochs 5, while its new head warms up); CLIP has no head to warm up: 0",
    )


class LAE(Method):
    kind = "lae"
    families = ("clip",)
    paper_row = "LAE-LoRA"
    group = "complementation"  # the paper's table: a frozen backbone with modules beside it
    after_step_rewrites_parameters = False  # after_step updates the offline PETs' buffers
    Options = LAEOptions

    def setup(self, ctx):
        from codyra.adapters.attach import attach_adapters
        from codyra.methods.lae.clip import lae_targets
        from codyra.methods.lae.pet import LAELoRA, load_pets

        o = self.options
        freeze(ctx.model)
        self.targets = lae_targets(ctx.targets, ctx.vocab, o.blocks)
        self.adapters = {
            t.name: LAELoRA(t.in_features, t.out_features, o.rank, o.scale, ctx.generator).to(ctx.device)
            for t in self.targets
        }
        if ctx.previous_state is not None:
            if not load_pets(self.adapters, ctx.previous_state, ctx.task_index - 1):
                for adapter in self.adapters.values():  # the second task: the EMA starts from the online PET
                    adapter.start_offline()
        elif ctx.task_index > 1:
            raise ValueError(f"LAE's task {ctx.task_index} needs task {ctx.task_index - 1}'s stored PETs: none found")
        attach_adapters(ctx.model, self.targets, self.adapters)
        self.step = 0
        self.frozen_steps = math.floor(o.freeze_fraction * ctx.total_steps) if ctx.task_index > 1 else 0
        self.online = [p for a in self.adapters.values() for p in a.online() if p.requires_grad]
        return [{"params": self.online, "weight_decay": ctx.weight_decay, "name": "lae_online"}]

    def before_optimizer_step(self, ctx):
        if self.step < self.frozen_steps:  # the reference's frozen epochs: no gradient, so no update
            for p in self.online:
                p.grad = None

    def after_step(self, step, total_steps):
        from codyra.methods.lae.pet import ema_update_

        self.step = step
        for adapter in self.adapters.values():
            offline = adapter.offline()
            if offline is not None:
                ema_update_(offline, adapter.online(), self.options.ema_decay)

    def step_metrics(self):
        return {"online_frozen": float(self.step <= self.frozen_steps)}

    def checkpoint_state(self):
        from codyra.methods.lae.pet import pets_state

        return pets_state(self.adapters, members=("offline",))

    def restore_checkpoint(self, state, step):
        import torch

        from codyra.methods.lae.pet import FACTORS

        self.step = step
        with torch.no_grad():
            for name, adapter in self.adapters.items():
                offline = adapter.offline()
                if offline is not None:
                    for t, f in zip(offline, FACTORS, strict=True):
                        t.copy_(state[f"offline.{name}.{f}"])

    def finish(self, model):
        from codyra.adapters.attach import detach_adapters
        from codyra.methods.lae.pet import pets_state
        from codyra.store.updates import TaskUpdate

        detach_adapters(model)  # the backbone stays theta_0; the PETs live in the method state
        self.state = pets_state(self.adapters)
        stored = sum(t.numel() for t in self.state.values())
        summary = {
            "trainable_params": sum(p.numel() for p in self.online),
            "stored_params": stored,
            "inference_extra_params": stored,
            "offline_pet": any(k.startswith("offline.") for k in self.state),
        }
        return TaskUpdate("none"), summary

    def state_to_store(self):
        return self.state

    @classmethod
    def for_inference(cls, model, states):
        from codyra.methods.lae.clip import attach_ensemble

        if not states or states[-1] is None:
            raise ValueError("LAE's evaluation needs the task's stored PETs: rerun its training job")
        return attach_ensemble(model, states[-1])


METHOD = LAE
