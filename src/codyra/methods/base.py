"""The interface every continual-learning method implements.

A method turns a backbone at theta_{i-1} into theta_i for one task:
``setup`` freezes/attaches what it trains and returns optimizer parameter groups,
``after_step`` runs after every optimizer step (e.g. proximal thresholding),
``finish`` merges what was learnt into the backbone and returns the stored update.
A baseline is one module in ``codyra.methods`` defining ``METHOD = <its class>``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from codyra.methods.options import MethodOptions, parse_options

if TYPE_CHECKING:  # method modules import torch lazily: config validation (every Snakemake start) reads them
    import torch
    from torch import nn

    from codyra.adapters.targets import PlacementVocabulary, Target
    from codyra.updates import TaskUpdate


class Method(ABC):
    kind: str = ""
    trains: bool = True
    # True: a task continues from the previous task's stored update (SeqLoRA); the training loop
    # sets ``previous`` to that update (None for task 1) before ``setup``
    carries_state: bool = False
    previous: TaskUpdate | None = None
    # the typed options of the method config (keys besides kind/train), see codyra.methods.options
    Options: ClassVar[type[MethodOptions]] = MethodOptions

    def __init__(self, spec: dict):
        self.options = parse_options(self.Options, spec, kind=self.kind)

    @abstractmethod
    def setup(
        self,
        model: nn.Module,
        targets: list[Target],
        vocab: PlacementVocabulary,
        generator: torch.Generator,
        weight_decay: float,
    ) -> list[dict]:
        """Prepare ``model`` for training; return AdamW parameter groups."""

    def after_step(self, step: int, total_steps: int) -> None:
        """Called after optimizer step ``step`` (1-based)."""

    def step_metrics(self) -> dict[str, float]:
        return {}

    @abstractmethod
    def finish(self, model: nn.Module) -> tuple[TaskUpdate, dict]:
        """Merge into ``model``; return the update and its JSON summary."""


def freeze(model: nn.Module) -> None:
    for p in model.parameters():
        p.requires_grad_(False)
