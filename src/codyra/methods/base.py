"""The interface every continual-learning method implements, in every model family.

A method turns a backbone at theta_{i-1} into theta_i for one task. The training engine
(:mod:`codyra.training.loop`) calls its hooks in this order, the same for CLIP and causal LMs:

1. ``setup(ctx)`` once, with a :class:`TaskContext`: freeze/attach what trains, build any
   teacher or memory; return the AdamW parameter groups (:func:`codyra.steps.optim.decay_groups`
   splits parameters the usual way).
2. Every optimizer step, for each micro-batch: the family's forward and task loss, then
   ``extra_loss(ctx, batch, outputs)`` (a scalar tensor or None, under the same autocast);
   the engine backpropagates ``task_loss + extra / micro_batches`` (LwF, ZSCL, EWC, O-LoRA).
3. ``before_optimizer_step(ctx)`` with the step's gradients in ``.grad`` (GEM/OGD
   projection, gradient masks); then clipping (LMs) and the optimizer step.
4. ``after_step(step, total_steps)`` (CoDyRA's proximal step, weight ensembling);
   ``step_metrics()`` goes into the step's history record (0-d tensors are read a step later).
   With each resumable checkpoint the engine saves ``checkpoint_state()`` (mid-task tensors: a
   running weight average, a running Fisher); a resumed job calls
   ``restore_checkpoint(state, step)`` right after ``setup``.
5. ``finish(model)`` -> (TaskUpdate, summary): merge into the backbone and return what is
   stored; ``state_to_store()`` -> tensors saved beside the update
   (``method_state.safetensors``: Fisher diagonals, gradient memories, kept modules).
   Task i+1 receives them as ``ctx.previous_state``; evaluation hands every task's state to
   ``for_inference`` when it rebuilds theta_i for a cell A[i, j].

Summary keys every method reports (the computation-cost table reads them): ``trainable_params``
(the method returns it), ``inference_extra_params`` (parameters kept beside the merged backbone at
inference; default 0), ``inference_memory`` (stored sample values read at inference, e.g.
RAIL-Dual's feature memory; default 0), and, filled in by the engine, ``stored_bytes`` (update + method state on
disk) and ``step_seconds`` (mean wall time per optimizer step).

Batches are dicts of tensors on the device; a method reads only the keys the family documents
(``ctx.family.batch_keys``) and asks the job for a forward of any model on a batch
(``ctx.forward(model, batch)`` -> outputs dict with at least ``logits``: a teacher's, theta_0's)
and for the family's task loss (``ctx.task_loss(batch, outputs)``, a mean), so a method
written once runs in both families. A baseline is one module in ``codyra.methods`` defining
``METHOD = <its class>`` (or a folder whose ``__init__`` re-exports it, its family-specific part
in ``clip.py`` / ``llm.py``); it declares the families it runs on (``families``) and never
tests the family by name. It sees only its context: it imports neither the experiment layer
(config, fingerprints), nor result paths, nor tracking.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from codyra.methods.options import MethodOptions, parse_options

if TYPE_CHECKING:  # method modules import torch lazily: config validation (every Snakemake start) reads them
    import torch
    from torch import nn

    from codyra.adapters.targets import PlacementVocabulary, Target
    from codyra.store.updates import TaskUpdate


def _reads_no_runs(method: str) -> dict:
    raise ValueError(
        f"this TaskContext reads no other run's results (asked for {method!r}'s): it is not part of a training job"
    )


@dataclass
class TaskContext:
    """What a method sees of the job training task ``task_index``.

    ``model`` is theta_{i-1} on the training device (in fp32); ``theta_0()`` builds a fresh
    copy of the pretrained model on the CPU in fp32 (a frozen teacher: move it to ``device``
    and call ``requires_grad_(False)``); ``previous_state`` is task i-1's ``state_to_store()``
    (None for task 1, or when nothing was stored). ``forward(model, batch)`` runs any model of
    this family on a training batch (the trained one or a teacher; outputs: ``logits``, plus
    ``image_features`` / ``text_features`` for CLIP); ``task_loss(batch, outputs)`` is the
    family's loss of those outputs (a mean). ``stored_state(k)`` / ``stored_update(k)`` read
    task k's state / update (1 <= k < i; on demand: a full fine-tuning delta is model-sized).
    ``generator`` seeds the method's own random initialisation (a pure function of (seed,
    task)); ``cfg`` is the full config (for a method that needs e.g. reference data).
    ``total_steps`` / ``steps_per_epoch``: the task's optimizer steps and those of one pass over
    its training set (rounded up; TRACE's per-epoch quantities: OGD's last epoch).
    ``micro_batches_per_step`` / ``micro_batches_per_epoch``: the backward passes of one step
    (``train.gradient_accumulation``; 1 where a step is one batch) and of one pass over the
    training set (rounded up; default ``steps_per_epoch``, one per step): TRACE's EWC divides its
    Fisher by the micro-batches of an epoch.
    ``task_batches()`` iterates the task's training micro-batches of all its steps, as training
    draws them (a method that needs a pass over the task's data before or after training:
    InfLoRA's input subspaces). ``task`` is the family's description of the task being trained
    (CLIP: its ``codyra.data.tasks.ClassificationTask``; None where the family has none).
    ``train`` is the job's resolved training settings (config key ``train`` with the method's and
    the task's overrides: ``batch_size``, ``lr``, ...). ``run_summary(m)`` reads the training
    summary of task i (same seed) of another method ``m`` of the grid (the norm-matched probe's
    reference norms); a context outside a training job has none.
    """

    model: nn.Module
    family: Any  # the job's codyra.family.Family (not imported: the family seam sits above the methods)
    targets: list[Target]
    vocab: PlacementVocabulary
    generator: torch.Generator
    weight_decay: float
    task_index: int
    device: torch.device
    previous_state: dict[str, torch.Tensor] | None
    theta_0: Callable[[], nn.Module]
    forward: Callable[[nn.Module, dict], dict]
    task_loss: Callable[[dict, dict], torch.Tensor]
    stored_state: Callable[[int], dict[str, torch.Tensor] | None]
    stored_update: Callable[[int], TaskUpdate]
    total_steps: int
    steps_per_epoch: int
    task_batches: Callable[[], Iterable[dict]]
    cfg: dict
    method_name: str
    seed: int
    micro_batches_per_step: int = 1
    task: Any = None
    micro_batches_per_epoch: int | None = None
    train: dict = field(default_factory=dict)
    run_summary: Callable[[str], dict] = _reads_no_runs

    def __post_init__(self):
        if self.micro_batches_per_epoch is None:
            if self.micro_batches_per_step != 1:
                raise ValueError("TaskContext: give micro_batches_per_epoch when a step takes several micro-batches")
            self.micro_batches_per_epoch = self.steps_per_epoch


@dataclass(frozen=True)
class Row:
    """A row of cells as its job evaluates it: theta_``i`` of ``method`` (a key of
    ``method_configs``) and ``seed``, tested on the tasks ``js`` (the j of A[i, j]). The method is
    resolved once, where the job starts (:func:`codyra.evaluation.evaluate.row_of`): ``kind`` its class and
    ``spec`` its config, both None for the pretrained model's row 0 (``method`` ``pretrained``)."""

    method: str
    seed: int | None
    i: int
    js: tuple[int, ...]
    kind: type[Method] | None = None
    spec: dict | None = field(default=None, compare=False)

    @property
    def options(self) -> MethodOptions:
        """The method's typed options."""
        if self.kind is None:
            raise ValueError("the pretrained model's row has no method options")
        return self.kind(self.spec).options


@dataclass(frozen=True)
class RowContext:
    """What a domain-predicting method sees of the evaluation of one row (``routed_cells``).

    ``cfg`` is the full config (the benchmark's tasks, evaluation settings); ``row`` the row, with
    the method's typed options (``row.options``); ``stored_state()`` reads task i's stored method
    state (a clear error where none is stored); ``rebuild()`` builds theta_i (the family's bundle,
    with ``.model``: theta_0 plus the stored updates 1..i) on the CPU; ``pretrained()`` builds
    theta_0 (the family's bundle)."""

    cfg: dict
    row: Row
    device: torch.device
    stored_state: Callable[[], dict[str, torch.Tensor]]
    rebuild: Callable[[], Any]
    pretrained: Callable[[], Any]

    @property
    def options(self) -> MethodOptions:
        return self.row.options

    def from_stored_state(self, row_function):
        """The cells of ``row_function(cfg, method, options, seed, i, js, device, state)``: a method
        that evaluates a row from task i's stored state alone (its modules beside theta_0)."""
        r = self.row
        return row_function(self.cfg, r.method, self.options, r.seed, r.i, list(r.js), self.device, self.stored_state())


@dataclass(frozen=True)
class Footprint:
    """What a method holds while it trains one task, beside the model, its gradients and AdamW's
    moments (which the estimate counts for the trainable parameters). Bytes are per trainable parameter,
    on every rank; the estimate turns them into a job's host and GPU memory and runtime."""

    full_backbone: bool = False  # every backbone parameter trains (else adapters of adapter_rank, or prompts)
    adapter_rank: int = 0  # adapters of this rank on the matrices the placement reaches
    host_bytes: float = 0.0  # kept in host memory through the task (what it loads of task i-1's state included)
    stored_bytes: float = 0.0  # what the lead rank stores at the end (update and state), in host memory then
    device_bytes: float = 0.0  # kept on the training device
    largest_tensor_bytes: float = 0.0  # per entry of the largest parameter, on the device while the method works on it
    teachers: int = 0  # frozen fp32 copies of the model on the device (a distillation's teacher)
    extra_loaders: int = 0  # image streams it draws beside the task's batches (each data.num_workers processes)
    step_cost: float = 1.0  # compute of a training step relative to a LoRA step (a forward and a backward: 2 forwards)
    prompt_tokens: int | None = None  # the longest prompt its rows show a causal LM (None: the config's)


class Method(ABC):
    kind: str = ""
    # the model families (``model.family`` values) the method runs on; config validation rejects
    # any other before any work. Every kind declares it in its own class body, never inherited
    # (CoDyRA runs on both families, CoDyRA + RAIL on CLIP only).
    families: ClassVar[tuple[str, ...]]
    trains: bool = True
    # the paper's table group: "continual" (updates the backbone), "complementation" (frozen
    # backbone plus per-task modules chosen at inference) or "reference" (zero-shot)
    group: ClassVar[str] = "continual"
    # True: inference predicts each sample's domain (cells store routing; tables mark it with a
    # dagger, see ``daggered``): evaluation computes a row through ``routed_cells``
    predicts_domain: ClassVar[bool] = False
    # True: the method fits in closed form on one pass of the task's frozen features (the
    # family's ``feature_pass``) through ``absorb``, instead of gradient steps (RAIL)
    closed_form: ClassVar[bool] = False
    # True: evaluation rewrites task j's test prompts through ``test_prompts`` (FIX(ICL)'s
    # demonstrations), so a method that never trains is evaluated, not copied from row 0
    rewrites_prompts: ClassVar[bool] = False
    # True: training reads the reference data (``data.reference``, ZSCL's), which is then part of
    # its settings; other methods' fingerprints hold it as null, so adding ZSCL to a grid reruns nothing else
    reads_reference_data: ClassVar[bool] = False
    # False: after_step updates only the method's own state (counters, statistics, buffers), never a
    # trainable parameter, so DeepSpeed ZeRO needs no fp32 master-weight round trip after each step
    # (True: it rewrites parameters in place; under ZeRO they must form the "gates" group)
    after_step_rewrites_parameters: ClassVar[bool] = True
    # True: each task's stored update is low-rank factors A, B, w (``TaskUpdate("lora")``), which the
    # rank, A-orthogonality and amplification analyses read; a method with a ``rank`` option that
    # stores something else (LAE, CL-LoRA) keeps False
    stores_low_rank_update: ClassVar[bool] = False
    # the typed options of the method config (keys besides kind/train), see codyra.methods.options
    Options: ClassVar[type[MethodOptions]] = MethodOptions
    # the method's row in the paper's tables (codyra.analysis.compare), with the paper's dagger:
    # a str.format template of its options ("LoRA (r={rank})"; ":title" title-cases a text option,
    # "RAIL-{variant:title}†"), or None (the paper has no such row). Every kind declares it in its
    # own class body, never inherited (a subclass is another row of the paper's tables).
    paper_row: ClassVar[str | None]
    # the row label in our tables where the paper has no row (paper_row None): a template as
    # paper_row ("Full FT"); None: the config's method name
    display_name: ClassVar[str | None] = None

    def __init__(self, spec: dict):
        self.options = parse_options(self.Options, spec, kind=self.kind)

    @classmethod
    def daggered(cls, family) -> bool:
        """Whether the paper's tables mark this method's rows with a dagger (domain or distribution
        detection at inference) on ``family`` (a :class:`codyra.family.Family`): by default where
        it predicts the domain."""
        return cls.predicts_domain

    @classmethod
    def row_label(cls, spec: dict, template: str | None = None) -> str | None:
        """``template`` (default: the kind's paper_row, else its display_name) filled in with the
        options of the method config ``spec``; None where there is no template."""
        if template is None:
            template = cls.__dict__.get("paper_row") or cls.display_name
        if template is None:
            return None
        options = parse_options(cls.Options, spec, kind=cls.kind)
        values = {f.name: getattr(options, f.name) for f in fields(options)}
        return template.format(**{k: _Text(v) if isinstance(v, str) else v for k, v in values.items()})

    @abstractmethod
    def setup(self, ctx: TaskContext) -> list[dict]:
        """Prepare ``ctx.model`` for training; return AdamW parameter groups."""

    def extra_loss(self, ctx: TaskContext, batch: dict, outputs: dict) -> torch.Tensor | None:
        """A term added to the family's task loss of this micro-batch (None: nothing)."""
        return None

    def before_optimizer_step(self, ctx: TaskContext) -> None:
        """Called with the step's gradients accumulated, before clipping and the optimizer step
        (default: nothing)."""
        return

    def after_step(self, step: int, total_steps: int) -> None:
        """Called after optimizer step ``step`` (1-based; default: nothing)."""
        return

    def step_metrics(self) -> dict[str, float | torch.Tensor]:
        """Values for the step's history record: numbers, or 0-d tensors left where they were
        computed (the loop reads them after the next step is queued: no device sync per step)."""
        return {}

    @abstractmethod
    def finish(self, model: nn.Module) -> tuple[TaskUpdate, dict]:
        """Merge into ``model``; return the update and its JSON summary (with ``trainable_params``)."""

    def absorb(
        self, previous_state: dict[str, torch.Tensor] | None, batches: list, num_classes: int, seed: int
    ) -> None:
        """A closed-form method's fit of one task: ``batches`` of (frozen features, labels over the
        ``num_classes`` classes of tasks 1..i), ``previous_state`` task i-1's stored state."""
        raise TypeError(
            f"method kind {self.kind!r} does not fit in closed form (its closed_form is False): "
            "the engine trains it by steps"
        )

    @classmethod
    def routed_cells(cls, row: RowContext):
        """A domain-predicting method's cells A[i, j] (with their ``routing``) of ``row.row``."""
        raise TypeError(
            f"method kind {cls.kind!r} has no task-agnostic inference (its predicts_domain is False): "
            "its cells come from the family"
        )

    def checkpoint_state(self) -> dict[str, torch.Tensor]:
        """Mid-task tensors a resumed job needs, saved with each checkpoint ({}: none)."""
        return {}

    def restore_checkpoint(self, state: dict[str, torch.Tensor], step: int) -> None:
        """Resume after ``step`` completed steps from ``checkpoint_state()``'s tensors (after ``setup``;
        default: nothing, as the default ``checkpoint_state`` saves nothing)."""
        return

    def state_to_store(self) -> dict[str, torch.Tensor]:
        """Tensors kept beside this task's update for task i+1 and for evaluation ({}: none)."""
        return {}

    @classmethod
    def for_inference(cls, model: nn.Module, states: list[dict[str, torch.Tensor] | None]) -> nn.Module:
        """theta_i as evaluated, from the merged backbone and the stored states of tasks 1..i
        (a method keeping modules beside the backbone, e.g. task routing, attaches them here)."""
        return model

    @classmethod
    def for_task(cls, model: nn.Module, states: list[dict[str, torch.Tensor] | None], j: int) -> nn.Module:
        """theta_i as evaluated on task j's test set: ``for_inference``, unless the method is told
        the test task (DualPrompt as the TRACE table runs it: task j's E-prompt)."""
        return cls.for_inference(model, states)

    @classmethod
    def test_prompts(
        cls, cfg: dict, method: str, seed: int, j: int, examples: list, tokenizer
    ) -> tuple[list[str], int]:
        """(task j's test prompts as the model is shown them, the token length they are cut to)
        of a ``rewrites_prompts`` method on an LM family; ``examples`` are the task's test
        examples (``.prompt``, ``.answer``). Evaluation shows every other method the task's own."""
        raise TypeError(f"method kind {cls.kind!r} shows the task's own test prompts (its rewrites_prompts is False)")

    @classmethod
    def overrides(cls, hook: str) -> bool:
        """Whether the method defines its own ``hook`` (a backend skips what a default hook needs
        none of: DeepSpeed's fp32 round trip after ``after_step``, gradients for ``before_optimizer_step``)."""
        return getattr(cls, hook) is not getattr(Method, hook)

    @classmethod
    def copies_row0(cls) -> bool:
        """Whether every row of this method is the pretrained model's row (copied, not evaluated)."""
        return not cls.trains and not cls.rewrites_prompts

    @classmethod
    def footprint(cls, options: MethodOptions, task_index: int) -> Footprint:
        """What the method keeps while it trains task ``task_index`` with ``options`` (a job's memory and
        runtime estimate, :mod:`codyra.experiment.resources`). Default: a few trained vectors (prompts), no state."""
        return Footprint()


def freeze(model: nn.Module) -> None:
    for p in model.parameters():
        p.requires_grad_(False)


def summary_defaults(summary: dict[str, Any]) -> dict[str, Any]:
    """A method's summary with the keys every method reports: ``inference_extra_params`` and
    ``inference_memory`` 0 when merged, ``step_seconds`` None when nothing trained."""
    if "trainable_params" not in summary:
        raise ValueError("a method's finish() summary must report trainable_params")
    return {"inference_extra_params": 0, "inference_memory": 0, "step_seconds": None, **summary}


def standalone_context(
    model: nn.Module,
    family: Any,
    generator: torch.Generator,
    weight_decay: float,
    total_steps: int = 1,
    *,
    keep_theta_0: bool = True,
) -> TaskContext:
    """Task 1's context for a model outside a training job (benchmarks, tests of a method's
    parameters): no stored state; theta_0 is a copy of ``model`` as given (``keep_theta_0``
    false: none, and asking for it raises; a 7B model is not copied for a method that never
    reads it); there is no batch pipeline, so ``forward`` / ``task_loss`` / ``task_batches`` raise."""
    import copy

    snapshot = copy.deepcopy(model) if keep_theta_0 else None

    def outside_job(*_):
        raise RuntimeError("this TaskContext is not part of a training job: it has no forward or task loss")

    def nothing_stored(k: int):
        raise ValueError(f"task {k} has no stored state: this context is task 1 outside a training job")

    return TaskContext(
        model=model,
        family=family,
        targets=family.targets(model),
        vocab=family.vocabulary,
        generator=generator,
        weight_decay=weight_decay,
        task_index=1,
        device=next(model.parameters()).device,
        previous_state=None,
        theta_0=(lambda: copy.deepcopy(snapshot)) if keep_theta_0 else outside_job,
        forward=outside_job,
        task_loss=outside_job,
        stored_state=nothing_stored,
        stored_update=nothing_stored,
        total_steps=total_steps,
        steps_per_epoch=total_steps,
        task_batches=outside_job,
        cfg={},
        method_name="",
        seed=0,
    )


class _Text(str):
    """A text option in a row-label template: ``{variant:title}`` prints it title-cased."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return self.title() if spec == "title" else super().__format__(spec)
