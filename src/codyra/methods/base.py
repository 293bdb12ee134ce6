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

if TYPE_CHECKING:  # method modules import torch lazily: config validation (every Snakemake start) reads them
    import torch
    from torch import nn

    from codyra.adapters.targets import PlacementVocabulary, Target
    from codyra.updates import TaskUpdate


class Method(ABC):
    kind: str = ""
    trains: bool = True
    # the paper's table group: "continual" (updates the backbone), "complementation" (frozen
    # backbone plus per-task modules chosen at inference) or "reference" (zero-shot)
    group: ClassVar[str] = "continual"
    # True: inference predicts each sample's domain (tables mark it with a dagger; cells store routing)
    predicts_domain: ClassVar[bool] = False
    # True: a task continues from the previous task's stored update (SeqLoRA); the training loop
    # sets ``previous`` to that update (None for task 1) before ``setup``
    carries_state: bool = False
    previous: TaskUpdate | None = None
    # method config keys (besides kind/train) and their defaults; unknown keys are errors
    defaults: ClassVar[dict] = {}

    def __init__(self, spec: dict):
        unknown = sorted(set(spec) - set(self.defaults) - {"kind", "train"})
        if unknown:
            raise ValueError(
                f"method kind {self.kind!r} has no option(s) {unknown}; valid options: {sorted(self.defaults)}"
            )
        self.options = {**self.defaults, **{k: v for k, v in spec.items() if k in self.defaults}}

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
