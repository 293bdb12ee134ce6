"""The seam between the engine, evaluation and workflow and a model family (CLIP, causal LM).

Each family package exposes one object satisfying :class:`Family` (``codyra.clip.family.CLIP``,
``codyra.llm.family.CAUSAL_LM``); :func:`family_of` picks it from ``model.family``. The engine,
the evaluation, the CLI and the workflow ask it; the light layers that every job imports read
the same facts from the families' light modules instead (config validation: the placement
vocabulary; cell files: CLIP cells count classes), so a job's import closure, its code version,
stays its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torch import nn

    from codyra.adapters.targets import PlacementVocabulary, Target
    from codyra.engine import FitSession


class Family(Protocol):
    name: str  # the model.family value
    vocabulary: PlacementVocabulary  # placement tokens its targets understand
    batch_keys: tuple[str, ...]  # the keys of a training batch dict (FitSession.forward's input)
    train_rule: str  # the Snakemake rule that trains one task of this family

    def pretrained(self, cfg: dict):
        """theta_0 as a bundle with ``.model`` (CPU, fp32)."""

    def rebuild(self, cfg: dict, method: str, seed: int, upto: int):
        """theta_upto = theta_0 + stored updates 1..upto, as a bundle with ``.model``."""

    def targets(self, model: nn.Module) -> list[Target]:
        """The matrices an adapter may attach to."""

    def fit_session(self, cfg: dict, job: dict, method_name: str, seed: int, task_index: int, device) -> FitSession:
        """The family's side of training one task (model, batches, loss, optimizer backend)."""

    def delegate(self, cfg: dict, method_name: str, seed: int, task_index: int, run) -> dict | None:
        """Run the training job elsewhere and return its summary (the LM family re-executes
        itself under torchrun for DeepSpeed), or None to train in this process."""

    def cells(self, cfg: dict, method: str, seed: int | None, i: int, js: list[int], device):
        """Yield the cells A[i, j] (dicts, without settings) of theta_i for j in ``js``."""

    def own_pretraining(self, cfg: dict) -> str | None:
        """The theta_0 file a mini benchmark pretrains itself (`codyra pretrain-mini`), else None."""

    def pretrain_own(self, cfg: dict) -> None:
        """Write the mini benchmark's theta_0 (and its data where it has its own)."""


def family_of(cfg_or_name: dict | str) -> Family:
    """The family object of a config (or of a ``model.family`` value). Imported here, on
    demand: CLIP jobs must not import transformers, nor LM jobs open_clip."""
    name = cfg_or_name if isinstance(cfg_or_name, str) else cfg_or_name["model"]["family"]
    if name == "clip":
        from codyra.clip.family import CLIP

        return CLIP
    if name == "causal_lm":
        from codyra.llm.family import CAUSAL_LM

        return CAUSAL_LM
    raise ValueError(f"config key model.family: unknown family {name!r}; choose clip or causal_lm")
