"""InfLoRA (Liang & Li 2024, liangyanshuo/InfLoRA ``methods/inflora.py``): the down-projection
of task i is designed from the inputs so the update does not interfere with earlier tasks; only
B trains.

Per adapted matrix, with C = mean over the task's tokens of x x^T (``cur_matrix``, input Gram):
- before training task i: C_hat = C (task 1), C - F F^T C (``remove``: F spans earlier inputs)
  or F F^T C (``retain``: F spans the space free of them); A = U[:, :r]^T / sqrt(3) from the SVD
  of C_hat; B = 0 and trains; A is frozen. No LoRA scaling (the reference adds B A to W).
- after training task i: C from the trained model on the task's data, and DualGPM's update of
  (F, type) with threshold (lame - lamb) * (i - 1) / N + lamb (``update_DualGPM``), including
  its final switch of a ``remove`` basis wider than half the space to its complement.

After the first task, with r directions reaching the threshold out of k: r < k / 2 stores U[:, :r]
as ``remove``; otherwise the reference stores U[:, :r] too but marks it ``retain``
(``update_DualGPM``, the ``else`` branch after ``if r < (activation.shape[0]/2)``). At r = k / 2
exactly we do the same (its final check, retain bases at most k / 2 wide, passes). Where it
differs: for r > k / 2 the reference fails that check (an assertion) and stops; we store the
complement U[:, r:] that the retain branch means. The reference trains only K and V of ViT
attention (``lora_B_k``, ``lora_B_v``); the placement option selects matrices here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option


def update_gram(gram, count: int, x):
    """The running mean of x x^T over tokens (``cur_matrix``), with the new inputs ``x`` (..., k)."""
    import torch

    flat = x.detach().reshape(-1, x.shape[-1])
    flat = flat.float() if flat.dtype in (torch.float16, torch.bfloat16) else flat  # the reference: fp32
    total = flat.T @ flat
    if gram is None:
        return total / flat.shape[0], flat.shape[0]
    return (gram * count + total) / (count + flat.shape[0]), count + flat.shape[0]


def threshold_at(task_index: int, num_tasks: int, lamb: float, lame: float) -> float:
    """DualGPM's energy threshold after task ``task_index`` (1-based)."""
    return (lame - lamb) * (task_index - 1) / num_tasks + lamb


def design_down_projection(gram, feature, retain: bool, rank: int):
    """A (rank x k) for the next task: the top singular directions of the projected Gram."""
    import torch

    if feature is not None:
        proj = feature @ feature.T @ gram
        gram = proj if retain else gram - proj
    U = torch.linalg.svd(gram, full_matrices=False).U
    return U[:, :rank].T / math.sqrt(3)


def update_dualgpm(feature, retain: bool, gram, threshold: float):
    """DualGPM's new (feature, retain) for one matrix after a task with input Gram ``gram``."""
    import torch

    k = gram.shape[0]
    svd = torch.linalg.svd
    if feature is None:
        U, S, _ = svd(gram, full_matrices=False)
        ratio = S**2 / (S**2).sum()
        r = int((torch.cumsum(ratio, 0) < threshold).sum())
        if r < k / 2:
            feature, retain = U[:, : max(r, 1)], False
        elif 2 * r == k:  # the reference as run: its top r directions, marked retain
            feature, retain = U[:, :r], True
        else:  # the reference asserts here (module docstring): the complement, as the retain branch means
            feature, retain = U[:, r:], True
    else:
        total = (svd(gram, full_matrices=False).S ** 2).sum()
        proj = feature @ feature.T @ gram
        U, S, _ = svd(proj if retain else gram - proj, full_matrices=False)
        ratio = (S**2 / total).tolist()
        if not retain:
            acc, r = float((total - (S**2).sum()) / total), 0
            while r < len(ratio) and acc < threshold:
                acc, r = acc + ratio[r], r + 1
            if r:
                feature = torch.cat([feature, U[:, :r]], dim=1)[:, :k]
        else:
            acc, r = float((S**2).sum() / total), 0
            while r < len(ratio) and acc >= 1 - threshold:
                acc, r = acc - ratio[r], r + 1
            if r:
                kept = feature - U[:, :r] @ U[:, :r].T @ feature
                feature = svd(kept).U[:, : feature.shape[1] - r]
    if not retain and feature.shape[1] > k / 2:
        feature, retain = svd(feature).U[:, feature.shape[1] :], True
    return feature, retain


@dataclass(frozen=True)
class InfLoRAOptions(LoRAOptions):
    lamb: float = option(0.95, minimum=0, maximum=1, doc="DualGPM threshold after the first task")
    lame: float = option(1.0, minimum=0, maximum=1, doc="DualGPM threshold approached at the last task")


class InfLoRA(LoRA):
    kind = "inflora"
    families = ("clip", "causal_lm")
    paper_row = "InfLoRA"
    Options = InfLoRAOptions

    def setup(self, ctx):
        import torch

        if (
            torch.distributed.is_available()
            and torch.distributed.is_initialized()
            and torch.distributed.get_world_size() > 1
        ):
            raise ValueError(
                "inflora runs in one process: its subspaces come from one pass over the task's data, which "
                "ranks would each see a share of (set llm.deepspeed.enabled: false for this method)"
            )
        super().setup(ctx)
        narrow = sorted(name for name, a in self.adapters.items() if a.rank > a.in_features)
        if narrow:
            raise ValueError(
                f"inflora: rank {self.options.rank} exceeds the input width of {len(narrow)} adapted matrices "
                f"(e.g. {narrow[0]}, {self.adapters[narrow[0]].in_features}): its design takes that many directions "
                "of their input space; lower the rank or leave those matrices out of the placement"
            )
        state = ctx.previous_state or {}
        if ctx.task_index > 1 and not state:
            raise ValueError(f"inflora: task {ctx.task_index - 1}'s stored input subspaces are missing; retrain it")
        self.ctx, self.num_tasks, self.task_index = ctx, len(ctx.cfg["tasks"]), ctx.task_index
        self.subspaces = {}
        grams = self.input_grams(ctx)
        with torch.no_grad():
            for name, adapter in self.adapters.items():
                feature = state.get(f"{name}.feature")
                retain = bool(state[f"{name}.retain"]) if feature is not None else False
                feature = None if feature is None else feature.to(grams[name])
                self.subspaces[name] = (feature, retain)
                adapter.A.copy_(design_down_projection(grams[name], feature, retain, adapter.rank).to(adapter.A))
                adapter.A.requires_grad_(False)
                adapter.scale = 1.0
        return [{"params": [a.B for a in self.adapters.values()], "weight_decay": ctx.weight_decay, "name": "lora_B"}]

    def input_grams(self, ctx) -> dict:
        """Each adapter's input Gram over the task's training batches, through the current model
        in eval mode and without gradients (the reference's ``get_cur_feat`` passes)."""
        import torch

        model = ctx.model
        device = next(model.parameters()).device  # a causal LM reaches the device with its backend
        was_training = model.training
        grams = {name: (None, 0) for name in self.adapters}
        hooks = [
            adapter.register_forward_pre_hook(
                lambda _m, args, name=name: grams.__setitem__(name, update_gram(*grams[name], args[0]))
            )
            for name, adapter in self.adapters.items()
        ]
        try:
            model.eval()
            with torch.no_grad():
                for batch in ctx.task_batches():
                    ctx.forward(model, {k: v.to(device) for k, v in batch.items()})
        finally:
            model.train(was_training)
            for hook in hooks:
                hook.remove()
        missing = [name for name, (g, _) in grams.items() if g is None]
        if missing:
            raise RuntimeError(f"inflora: no input reached the adapters of {missing[:3]}")
        return {name: g for name, (g, _) in grams.items()}

    def after_step(self, step, total_steps):
        if step == total_steps:  # DualGPM's update from the trained model's inputs, on the device
            grams = self.input_grams(self.ctx)
            threshold = threshold_at(self.task_index, self.num_tasks, self.options.lamb, self.options.lame)
            self.subspaces = {n: update_dualgpm(*self.subspaces[n], grams[n], threshold) for n in self.adapters}

    def finish(self, model):
        update, summary = super().finish(model)
        return update, {**summary, "trainable_params": sum(a.B.numel() for a in self.adapters.values())}

    def state_to_store(self):
        import torch

        state = {}
        for name, (feature, retain) in self.subspaces.items():
            state[f"{name}.feature"] = feature.float().cpu().contiguous()
            state[f"{name}.retain"] = torch.tensor(int(retain))
        return state


METHOD = InfLoRA
