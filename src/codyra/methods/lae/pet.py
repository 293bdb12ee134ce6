"""LAE's PET math (:mod:`codyra.methods.lae.method`): the LoRA module with its online and offline
factors, the offline module's EMA and the inference ensemble of the two. Model-agnostic."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

FACTORS = ("A", "B", "s")  # a PET's tensors in the stored state: <member>.<target>.<factor>
MEMBERS = ("online", "offline")


class LAELoRA(nn.Module):
    """One PET: ``x -> s * (x A^T) B^T``, the reference's ``F.linear(x, W + s * B @ A)`` minus the
    frozen ``x W^T`` (gqk/LAE libml/model/pet/lora.py ``KVLoRA``, one of its key/value halves).

    It holds the online factors (A Kaiming-uniform with a = sqrt 5, drawn from ``generator``; B zero;
    s a learnable scalar at 1, or a fixed buffer when ``scale`` is given) and, once
    :meth:`start_offline` ran, the offline ones (buffers ``A_off``, ``B_off``, ``s_off``);
    ``use_offline`` picks which the forward reads."""

    def __init__(self, in_features: int, out_features: int, rank: int, scale: float | None, generator=None):
        super().__init__()
        if rank < 1:
            raise ValueError(f"LAE's LoRA rank must be >= 1, got {rank}")
        self.A = nn.Parameter(torch.empty(rank, in_features))
        self.B = nn.Parameter(torch.zeros(out_features, rank))
        bound = 1.0 / math.sqrt(in_features)  # kaiming_uniform_(a=sqrt(5)) on a (rank, in) matrix
        with torch.no_grad():
            self.A.uniform_(-bound, bound, generator=generator)
        if scale is None:
            self.s = nn.Parameter(torch.tensor(1.0))
        else:
            self.register_buffer("s", torch.tensor(float(scale)))
        for name in ("A_off", "B_off", "s_off"):
            self.register_buffer(name, None)
        self.use_offline = False

    def online(self) -> list[torch.Tensor]:
        return [self.A, self.B, self.s]

    def offline(self) -> list[torch.Tensor] | None:
        return None if self.A_off is None else [self.A_off, self.B_off, self.s_off]

    def start_offline(self) -> None:
        """The offline PET as a copy of the online one (ModelEmaV2's deep copy of the PETs)."""
        self.A_off, self.B_off, self.s_off = (t.detach().clone() for t in self.online())

    def set_offline(self, tensors: list[torch.Tensor]) -> None:
        self.A_off, self.B_off, self.s_off = (t.detach().clone().to(self.A.device) for t in tensors)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tensors = self.offline() if self.use_offline else self.online()
        if tensors is None:
            raise RuntimeError("this LAE PET has no offline factors yet (they start with the second task)")
        A, B, s = tensors
        return F.linear(F.linear(x, A.to(x.dtype)), B.to(x.dtype)) * s.to(x.dtype)


def ema_update_(offline: list[torch.Tensor], online: list[torch.Tensor], decay: float) -> None:
    """timm's ``ModelEmaV2.update`` (gqk/LAE main.py ``post_train_step``, after every training step):
    offline <- decay * offline + (1 - decay) * online, in place."""
    if not 0.0 < decay < 1.0:
        raise ValueError(f"the EMA decay must be in (0, 1), got {decay}")
    with torch.no_grad():
        for off, on in zip(offline, online, strict=True):
            off.copy_(off * decay + (1.0 - decay) * on.detach().to(off.dtype))


def ensemble_probabilities(online_logits: torch.Tensor, offline_logits: torch.Tensor) -> torch.Tensor:
    """LAE's inference (gqk/LAE main.py ``eval_epoch``): the element-wise maximum of the online and the
    offline model's softmax over the classes."""
    if online_logits.shape != offline_logits.shape:
        raise ValueError(f"logits of different shapes: {tuple(online_logits.shape)}, {tuple(offline_logits.shape)}")
    return torch.stack([online_logits.softmax(dim=-1), offline_logits.softmax(dim=-1)], dim=-1).max(dim=-1).values


def load_pets(adapters: dict[str, LAELoRA], state: dict[str, torch.Tensor], task: int) -> bool:
    """Put a stored state's PETs into ``adapters`` (target name -> PET); True when it holds offline ones."""
    names = {k.split(".", 1)[1].rsplit(".", 1)[0] for k in state if k.startswith("online.")}
    if names != set(adapters):
        raise ValueError(
            f"LAE's state of task {task} has PETs on {sorted(names)}, this config adapts {sorted(adapters)}: "
            "the blocks must stay the same through the stream; rerun from task 1"
        )
    has_offline = any(k.startswith("offline.") for k in state)
    with torch.no_grad():
        for name, adapter in adapters.items():
            stored = [state[f"online.{name}.{f}"] for f in FACTORS]
            expected = [tuple(t.shape) for t in adapter.online()]
            if [tuple(t.shape) for t in stored] != expected:
                raise ValueError(
                    f"LAE's stored PET {name!r} of task {task} has shapes {[tuple(t.shape) for t in stored]}, "
                    f"this config's rank needs {expected}: rerun from task 1"
                )
            for t, value in zip(adapter.online(), stored, strict=True):
                t.copy_(value)
            if has_offline:
                adapter.set_offline([state[f"offline.{name}.{f}"] for f in FACTORS])
    return has_offline


def pets_state(adapters: dict[str, LAELoRA], members=MEMBERS) -> dict[str, torch.Tensor]:
    """The stored layout: ``online.<target>.{A,B,s}`` and, once they exist, ``offline.<target>.{A,B,s}``."""
    state = {}
    for name, adapter in adapters.items():
        for member in members:
            tensors = adapter.online() if member == "online" else adapter.offline()
            if tensors is not None:
                state |= {
                    f"{member}.{name}.{f}": t.detach().float().cpu().clone()
                    for f, t in zip(FACTORS, tensors, strict=True)
                }
    return state
