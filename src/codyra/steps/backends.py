"""How an optimizer step runs in one process (torch AdamW or SGD); DeepSpeed ZeRO-2 across ranks is
:mod:`codyra.llm.deepspeed_backend`. Both expose the interface :class:`codyra.family.Backend` states:

- ``autocast()``, ``forward(**inputs)``, ``backward(loss)`` (once per micro-batch: gradients accumulate), ``step()``
  (clipping and the optimizer step, once per optimizer step), ``after_step(method, step,
  total)`` (the method's post-step operator, e.g. CoDyRA's proximal step), ``all_sum(tensor)``
  (sum over ranks);
- ``save(directory, step, scheduler, history, method_state)`` / ``load(directory, scheduler)``:
  resumable checkpoints in the layout of :mod:`codyra.store.checkpoints` (full fp32 tensors, torch AdamW's
  state layout, the method's mid-task tensors), so a checkpoint resumes on any number of ranks;
- ``finalize()``: before ``Method.finish``, make the module's trainable parameters hold their
  exact fp32 values; ``report()``: what the summary records about the backend;
- ``moments()`` / ``load_moments(moments)``: AdamW's per-parameter state as {parameter name:
  {"step", "exp_avg", "exp_avg_sq"}} in full fp32, for ``train.carry_optimizer``.
"""

from __future__ import annotations

import torch

from codyra.device import autocast
from codyra.steps.optim import base_lr
from codyra.store.checkpoints import load_checkpoint, save_checkpoint


def build_optimizer(groups: list[dict], hp: dict) -> torch.optim.Optimizer:
    """``train.optimizer`` at :func:`~codyra.steps.optim.base_lr` over the method's parameter groups
    (each group's weight decay its own),
    fused: one kernel for all parameters instead of a loop over hundreds of small adapter tensors,
    and on a CPU the same numbers on every processor (AdamW's looped square root goes through
    MKL's vector math, whose rounding differs between processors; see
    ``codyra.device.portable_sqrt``)."""
    if hp["optimizer"] == "sgd":
        return torch.optim.SGD(groups, lr=base_lr(hp), momentum=hp["momentum"], fused=True)
    return torch.optim.AdamW(groups, lr=base_lr(hp), betas=tuple(hp["betas"]), eps=hp["eps"], fused=True)


class PlainBackend:
    """A single process: ``train.optimizer`` (fused torch AdamW or SGD) over the method's groups,
    optional bf16 autocast on a GPU (``train.precision``), optional gradient clipping
    (``clip_norm`` > 0)."""

    rank, world_size = 0, 1

    def __init__(self, model, groups, hp: dict, device: torch.device, *, clip_norm: float = 0.0):
        self.module, self.device, self.precision = model.to(device), device, hp["precision"]
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self.optimizer = build_optimizer(groups, hp)
        self.clip_norm = clip_norm

    def autocast(self):
        return autocast(self.device, self.precision)

    def forward(self, **inputs):
        return self.module(**inputs)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> None:
        if self.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(list(self.params.values()), self.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def after_step(self, method, step: int, total: int) -> None:
        method.after_step(step, total)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def save(self, directory, step: int, scheduler, history: list, method_state: dict | None = None) -> None:
        save_checkpoint(
            directory,
            step=step,
            params=self.params,
            optimizer=self.optimizer,
            scheduler=scheduler,
            history=history,
            method_state=method_state,
        )

    def load(self, directory, scheduler) -> tuple[int, list]:
        return load_checkpoint(directory, params=self.params, optimizer=self.optimizer, scheduler=scheduler)

    def moments(self) -> dict:
        state = self.optimizer.state
        return {
            n: {k: v.detach().float().cpu() for k, v in state[p].items()} for n, p in self.params.items() if p in state
        }

    def load_moments(self, moments: dict) -> None:
        """Continue from ``moments`` (torch's ``load_state_dict`` puts each slot where AdamW keeps it)."""
        saved = self.optimizer.state_dict()
        order = [p for group in self.optimizer.param_groups for p in group["params"]]
        index = {id(p): i for i, p in enumerate(order)}
        saved["state"] = {
            index[id(self.params[n])]: {k: v.clone() for k, v in slots.items()} for n, slots in moments.items()
        }
        self.optimizer.load_state_dict(saved)

    def finalize(self) -> None:
        """Parameters already are the fp32 values the optimizer produced."""

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        """Nothing to release."""
