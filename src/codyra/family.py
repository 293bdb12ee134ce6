"""The seam between the engine, evaluation and workflow and a model family (CLIP, causal LM, BLIP).

Each family package exposes one object satisfying :class:`Family` (``codyra.clip.family.CLIP``,
``codyra.llm.family.CAUSAL_LM``, ``codyra.blip.family.BLIP``); :func:`family_of` picks it from
``model.family``. The loop, the evaluation, the CLI, the job table, the fingerprints, the
analyses and the workflow ask it: only this module and config validation read
``model.family``. Config validation, which every Snakemake start runs, reads the placement
vocabulary from the families' light modules instead; the stored results (:mod:`codyra.store`)
are told what they need (``read_cell(classifies=...)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from codyra.adapters.targets import PlacementVocabulary, Target
    from codyra.methods.base import Method, Row


class Backend(Protocol):
    """How an optimizer step runs: :class:`codyra.steps.backends.PlainBackend` (one process) or
    ``codyra.llm.deepspeed_backend.ZeroBackend`` (DeepSpeed ZeRO-2 ranks)."""

    optimizer: torch.optim.Optimizer
    rank: int
    world_size: int

    def autocast(self): ...
    def forward(self, **inputs): ...
    def backward(self, loss: torch.Tensor) -> None: ...
    def step(self) -> None: ...
    def after_step(self, method: Method, step: int, total: int) -> None: ...
    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor: ...
    def save(self, directory, step: int, scheduler, history: list, method_state: dict | None = None) -> None: ...
    def load(self, directory, scheduler) -> tuple[int, list]: ...
    def finalize(self) -> None: ...
    def report(self) -> dict: ...
    def close(self) -> None: ...


class FitSession(Protocol):
    """A family's side of one training job (built by ``Family.fit_session``)."""

    model: nn.Module  # theta_{i-1}; the loop puts it on ``device`` before the method's setup
    device: torch.device
    total: int  # optimizer steps of the task
    steps_per_epoch: int  # optimizer steps of one pass over the task's training set (rounded up)
    micro_batches_per_step: int  # backward passes of one optimizer step
    micro_batches_per_epoch: int  # backward passes of one pass over the task's training set (rounded up)
    description: str  # progress-bar label
    dropout_key: tuple[int, ...]  # extra parts of the per-step adapter-dropout seed (the rank)

    def backend(self, groups: list[dict], method: Method) -> Backend:
        """The optimizer backend over the method's groups (called once, after ``setup``)."""

    def batches(self, start: int) -> Iterable[list[dict]]:
        """Per optimizer step ``start+1..total``: this rank's micro-batches (dicts on the device)."""

    def forward(self, model: nn.Module, batch: dict) -> dict:
        """``model``'s outputs on a batch (the trained model runs through the backend)."""

    def task_loss(self, batch: dict, outputs: dict) -> torch.Tensor:
        """The family's loss of one batch (a mean), for methods."""

    def begin_step(self, micro_batches: list[dict]) -> None:
        """Before the step's forwards (e.g. count the step's answer tokens on all ranks)."""

    def step_loss(self, batch: dict, outputs: dict) -> torch.Tensor:
        """This micro-batch's share of the step's objective (what is backpropagated)."""

    def step_record(self) -> dict:
        """The step's history fields: ``loss`` (the task loss), and any the family adds; numbers or
        0-d tensors on the device (the loop reads them a step later, :mod:`codyra.training.step_log`)."""

    def trained_model(self) -> nn.Module:
        """The model ``Method.finish`` merges into."""

    def keeps_model(self) -> bool:
        """Whether the returned model is theta_i as rebuilt from the stored updates."""


class Family(Protocol):
    name: str  # the model.family value
    vocabulary: PlacementVocabulary  # placement tokens its targets understand
    batch_keys: tuple[str, ...]  # the keys of a training batch dict (FitSession.forward's input)
    # the workflow's rules of this family's jobs (a rule name keys a job's resources in a profile)
    train_rule: str  # trains one task
    eval_rule: str  # evaluates a trained run's row i >= 1 (row 0 is ``eval_row0``)
    cluster_job: str  # what one SLURM job holds by default (config key ``cluster_job``): "run" or "task"
    rows_apart: bool  # a trained row is a SLURM job of its own, never in its training's (which holds more GPUs)
    classifies: bool  # cells score classification over class labels (a cell records ``num_classes``)
    has_heldout_tasks: bool  # theta_i is evaluated on held-out tasks (config key ``heldout_tasks``)
    inapplicable_analyses: dict[str, str]  # the paper's analyses that do not apply, each with the reason
    means_table: str | None  # the paper's table of Transfer / Average / Last means that the family's runs fill, or None
    libraries: tuple[str, ...]  # the third-party modules its jobs import (snakemake_compat.import_libraries)

    def settings(self, cfg: dict) -> dict:
        """The config blocks only this family reads, part of every settings fingerprint."""

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

    def feature_pass(
        self, cfg: dict, seed: int, task_index: int, train: dict, device, model: nn.Module | None = None
    ) -> tuple[list, int]:
        """One pass of theta_0's (or ``model``'s) frozen features of task i's training data (in
        batches of the job's ``train`` settings, batch_size and augmentation), labels
        global over the stream: ([(features, labels)], classes of tasks 1..i), for closed-form
        methods (RAIL) and heads fitted on them (CoDyRA + RAIL)."""

    def cells(self, cfg: dict, row: Row, device):
        """Yield the cells A[i, j] (dicts, without settings) of ``row``'s theta_i for its tasks j;
        ``row.kind`` is the method's class (its inference hooks), None for the pretrained row."""

    def own_pretraining(self, cfg: dict) -> str | None:
        """The theta_0 file a mini benchmark pretrains itself (`codyra pretrain-mini`), else None."""


def family_of(cfg_or_name: dict | str) -> Family:
    """The family object of a config (or of a ``model.family`` value). Imported here, on
    demand: CLIP jobs must not import transformers, nor LM and BLIP jobs open_clip."""
    name = cfg_or_name if isinstance(cfg_or_name, str) else cfg_or_name["model"]["family"]
    if name == "clip":
        from codyra.clip.family import CLIP

        return CLIP
    if name == "causal_lm":
        from codyra.llm.family import CAUSAL_LM

        return CAUSAL_LM
    if name == "blip":
        from codyra.blip.family import BLIP

        return BLIP
    raise ValueError(f"config key model.family: unknown family {name!r}; choose clip, causal_lm or blip")
