"""MoE-Adapters (Yu et al., CVPR 2024; JiazuoYu/MoE-Adapters4CL ``mtil/``): a frozen CLIP with a
mixture of bottleneck-adapter experts beside the MLP of every block of both towers, one router
per task, and the distribution-discriminative auto-selector (DDAS) choosing the router (or the
zero-shot model) at inference.

Per task i (``mtil/src/models/finetune.py``, ``scripts/train/*router11_experts22*.sh``):
1. DDAS: task i's autoencoder learns to reconstruct the (sigmoid-squashed) frozen image
   features of its training images (``few_shot_AutoEncoder.py``), before the experts train.
2. The experts continue from task i-1 (shared by all tasks) except those frozen by earlier
   tasks; a new router (gate and noise weights, zero at creation) gates them; the loss is the
   image->text cross-entropy with label smoothing 0.2; the backbone never changes.
3. The experts chosen most often in this task's training (top 2 per layer) are frozen for
   every later task (the reference's ``frozen_list`` file).

Where we differ from the reference (said in the config too): the DDAS features are the frozen
CLIP's normalised image embedding, not an ImageNet AlexNet's conv5 map (no download on every
machine); only the autoencoders of learned tasks compete (the reference also scores untrained
ones and a TinyImageNet one that means "zero-shot"); with ``ddas_threshold: null`` each task's
threshold is the worst batch loss of its autoencoder on its own training epoch (the reference
sets one by hand, 0.0585 few-shot and 0.0655 full-shot for AlexNet features, after printing
those losses). As the reference, the autoencoder's lr schedule counts its epochs over the
task's whole training split (option ``ae_epoch``), and each evaluation batch of 128 test
images is routed as a whole (``ddas_batch_size``).
The CLIP side is :mod:`codyra.methods.moe_adapters.clip`; the layer math :mod:`codyra.methods.moe_adapters.layer`.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method, freeze
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class DDASOptions(MethodOptions):
    """MoE-Adapters' distribution-discriminative auto-selector (also CoDyRA-dagger's ``router: ddas``)."""

    ae_code_dim: int = option(100, minimum=1, doc="DDAS autoencoder code width (few_shot_autoencoder code_dims 100)")
    ae_iterations: int = option(
        301, minimum=1, doc="DDAS training steps (scripts: --iterations 300; the loop runs range(300 + 1))"
    )
    ae_lr: float = option(
        0.003, exclusive_minimum=0, doc="DDAS Adam lr (few_shot_AutoEncoder.py 0.003; full-shot AutoEncoder.py 0.01)"
    )
    ae_weight_decay: float = option(0.0001, minimum=0, doc="DDAS Adam weight decay (0.0001)")
    ae_decay_epochs: int = option(10, minimum=1, doc="DDAS lr x 0.1 every this many epochs (exp_lr_scheduler)")
    ae_epoch: str = option(
        "split",
        choices=("split", "trained"),
        doc="what one DDAS epoch counts: split = the batches of the task's whole training split, as the reference "
        "(few_shot_AutoEncoder.py: len(dataset.train_loader) while it trains on the 5-shot batches); "
        "trained = the batches it trains on",
    )
    ddas_threshold: float | None = option(
        None, doc="zero-shot above this reconstruction loss (null: per task, calibrated)"
    )
    ddas_batch_size: int = option(
        128, minimum=1, doc="test images per DDAS routing decision (args.py --batch-size-eval 128)"
    )


@dataclass(frozen=True)
class MoEAdaptersOptions(DDASOptions):
    experts: int = option(22, minimum=1, doc="experts per block (scripts: experts_num 22)")
    top_k: int = option(2, minimum=1, doc="experts per sample (args.py --topk 2)")
    bottleneck: int = option(64, minimum=1, doc="adapter width (args.py --ffn_num 64)")
    adapter_scale: float = option(0.1, exclusive_minimum=0, doc="adapter output scale (model.py adapter_scalar 0.1)")
    dropout: float = option(0.1, minimum=0, exclusive_maximum=1, doc="adapter dropout (model.py dropout 0.1)")
    label_smoothing: float = option(
        0.2, minimum=0, exclusive_maximum=1, doc="cross-entropy label smoothing (scripts: --ls 0.2)"
    )
    balance_loss: bool = option(
        False, doc="add 1e-2 (cv^2 importance + cv^2 load) per block (the reference computes it, never adds it)"
    )
    freeze_top: int = option(
        2, minimum=0, doc="experts per block frozen after each task (finetune.py: topk(choose_map, 2))"
    )

    def check(self):
        errors = []
        if self.top_k > self.experts:
            errors.append(("top_k", f"must be <= experts ({self.experts}), got {self.top_k}"))
        if self.freeze_top > self.experts:
            errors.append(("freeze_top", f"must be <= experts ({self.experts}), got {self.freeze_top}"))
        return errors


def ddas_epoch_batches(ctx, options: DDASOptions) -> int | None:
    """The batches one DDAS epoch counts (None: those it trains on). The reference's loader over
    the whole training split has ceil(images / --batch-size) batches."""
    import math

    full = getattr(ctx.task, "full_train_size", None)
    if options.ae_epoch == "trained" or full is None:  # no few-shot subset: the split is what it trains on
        return None
    return math.ceil(full / ctx.train["batch_size"])


def fit_selector(ctx, options: DDASOptions, model, generator):
    """(task i's DDAS autoencoder, its threshold): trained on ``model``'s image features (theta_0's)
    of the task's training batches, one epoch of them (``few_shot_AutoEncoder.py``)."""
    import itertools

    import torch

    from codyra.methods._routing import DomainAutoencoder, fit_autoencoder

    o = options
    was_training = model.training
    model.eval()
    with torch.no_grad():
        batches = itertools.islice(ctx.task_batches(), min(o.ae_iterations, ctx.steps_per_epoch))
        features = [ctx.forward(model, b)["image_features"].float().detach() for b in batches]
    model.train(was_training)
    ae = DomainAutoencoder(features[0].shape[1], o.ae_code_dim, generator=generator).to(features[0].device)
    worst = fit_autoencoder(
        ae, features, o.ae_iterations, o.ae_lr, o.ae_weight_decay, o.ae_decay_epochs, ddas_epoch_batches(ctx, o)
    )
    return ae.cpu(), worst if o.ddas_threshold is None else o.ddas_threshold


class MoEAdapters(Method):
    kind = "moe_adapters"
    families = ("clip",)
    paper_row = "MoE-Adapter†"
    group = "complementation"
    predicts_domain = True
    Options = MoEAdaptersOptions

    def setup(self, ctx):
        import torch

        from codyra.methods.moe_adapters.clip import attach_experts, ddas_state, load_ddas, load_expert_state

        o = self.options
        self.task_index = ctx.task_index
        autoencoders, thresholds = load_ddas(ctx.previous_state) if ctx.previous_state else ([], torch.zeros(0))
        ae, threshold = fit_selector(
            ctx, self.options, ctx.model, ctx.generator
        )  # the model is theta_0: MoE-Adapters never changes it
        self.ddas = ddas_state([*autoencoders, ae], [*thresholds.tolist(), threshold])
        self.autoencoders = [*autoencoders, ae]

        self.control, self.layers = attach_experts(ctx.model, o, ctx.generator)
        routers = load_expert_state(self.layers, ctx.previous_state) if ctx.previous_state else 0
        if routers != ctx.task_index - 1:
            raise ValueError(
                f"MoE-Adapters' state of task {ctx.task_index - 1} holds {routers} routers, "
                f"expected {ctx.task_index - 1}"
            )
        freeze(ctx.model)
        for layer in self.layers.values():
            layer.add_router()
            layer.routers[-1].requires_grad_(True)
            layer.noise[-1].requires_grad_(True)
            for expert, frozen in zip(layer.experts, layer.frozen.tolist(), strict=True):
                expert.requires_grad_(not frozen)
        self.control.route = ctx.task_index - 1
        params = [p for p in ctx.model.parameters() if p.requires_grad]
        self.trainable = sum(p.numel() for p in params)
        return [{"params": params, "weight_decay": ctx.weight_decay}]

    def extra_loss(self, ctx, batch, outputs):
        from codyra.methods.full import label_smoothing_correction

        terms = []
        smoothing = label_smoothing_correction(outputs, batch, self.options.label_smoothing)
        if smoothing is not None:
            terms.append(smoothing)
        if self.options.balance_loss:
            terms += self.control.balance
        self.control.balance.clear()
        return sum(terms) if terms else None

    def checkpoint_state(self):
        return {f"{name}.counts": layer.counts for name, layer in self.layers.items()}

    def restore_checkpoint(self, state, step):
        for name, layer in self.layers.items():
            layer.counts.copy_(state[f"{name}.counts"])

    def finish(self, model):
        import torch

        from codyra.methods.moe_adapters.clip import expert_state, inference_params
        from codyra.store.updates import TaskUpdate

        if self.options.freeze_top:
            for layer in self.layers.values():
                layer.frozen[torch.topk(layer.counts, self.options.freeze_top).indices] = True
        self.state = {**expert_state(self.layers), **self.ddas}
        summary = {
            "trainable_params": self.trainable,
            "stored_params": sum(t.numel() for t in self.state.values()),
            "inference_extra_params": inference_params(self.layers, self.autoencoders),
            "frozen_experts": int(sum(int(layer.frozen.sum()) for layer in self.layers.values())),
            "ddas_threshold": float(self.state["ddas.threshold"][-1]),
        }
        return TaskUpdate("none"), summary

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.moe_adapters.clip import moe_row

        return row.from_stored_state(moe_row)


METHOD = MoEAdapters
