"""Train task i of a benchmark with one method and seed, starting from theta_{i-1}: the one
training loop of every model family and method.

The family (:mod:`codyra.family`) supplies a :class:`~codyra.family.FitSession`: theta_{i-1} on the device,
the step's micro-batches, the forward, the task loss and the optimizer backend. The loop
owns the rest: seeding, the method's hooks (:mod:`codyra.methods.base`, in the order stated
there), the schedule, the history (each step's record read one step late:
:mod:`codyra.training.step_log`), resumable checkpoints, and writing the task (update, method
state, history, summary last, each atomically). It resolves no settings, result path or
tracking run: the job (:mod:`codyra.experiment.train_job`) hands it a :class:`TrainingTask`
(the resolved settings, the folders, the stored updates) and a :class:`MetricsLog`.

With ``train.carry_optimizer`` the job starts from the AdamW state task i-1's job ended with
(stored in its method state, checked against this job's trainable parameters) and stores its
own: one optimizer through the stream, as TRACE and TreeLoRA train.

Resumable: every ``checkpoint_every`` steps the trainable state, optimizer, scheduler and
history go to the task's checkpoint folder (keyed by the job: a job never resumes a checkpoint
of other settings); batches and adapter dropout masks are pure functions of (seed, task, step),
so a resumed run ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch

from codyra import __version__
from codyra.adapters.attach import fuse_adapters
from codyra.adapters.lora import seed_adapter_dropout
from codyra.device import fuses_adapters, precision_scope
from codyra.family import FitSession, family_of
from codyra.methods.base import Method, TaskContext, summary_defaults
from codyra.progress import progress_bar
from codyra.steps.batches import derive_seed
from codyra.steps.optim import pack_optimizer_state, unpack_optimizer_state
from codyra.steps.schedules import lr_factor
from codyra.store.checkpoints import find_checkpoint, load_method_checkpoint
from codyra.store.io import read_json, write_text
from codyra.store.paths import HISTORY_FILE, SUMMARY_FILE
from codyra.store.updates import save_update
from codyra.training.step_log import StepLog

if TYPE_CHECKING:
    from codyra.store.updates import TaskUpdate

log = logging.getLogger(__name__)


class MetricsLog(Protocol):
    """Where the lead rank's step records go as they are made (the job's MLflow run)."""

    def metrics(self, record: dict) -> None: ...


@dataclass(frozen=True)
class TrainingTask:
    """One training job as the loop sees it, resolved by the job from the config and the store."""

    cfg: dict
    method_name: str
    seed: int
    task_index: int
    job: dict  # the resolved settings of (method, task): ``method`` options and ``train`` hyperparameters
    settings: str  # the job's settings fingerprint, recorded in its summary
    out: Path  # the task folder the update, state, history and summary go to
    checkpoints: Path  # this job's checkpoint folder
    placement: dict  # the summary's fields that say where the update sits
    stored_state: Callable[[int], dict[str, torch.Tensor] | None]  # task k's stored method state
    stored_update: Callable[[int], TaskUpdate]  # task k's stored update
    run_summary: Callable[[str], dict]  # another method's summary of this task and seed


@dataclass
class TrainedTask:
    summary: dict
    model: torch.nn.Module | None  # theta_i in memory (None for methods that never train)


def resume(ckpt_dir, load, run: MetricsLog, total: int) -> tuple[int, list]:
    """(steps done, history) from this job's checkpoint, if any. The run receives the history up
    to the checkpoint, so its curve has no gap."""
    found = find_checkpoint(ckpt_dir)
    if found is None:
        return 0, []
    start, history = load(found)
    for record in history:
        run.metrics(record)
    log.info("resumed %s from step %d/%d", found, start, total)
    return start, history


def task_context(task: TrainingTask, session: FitSession) -> TaskContext:
    cfg, method_name, seed, task_index, job = task.cfg, task.method_name, task.seed, task.task_index, task.job
    family = family_of(cfg)
    model = session.model
    return TaskContext(
        model=model,
        family=family,
        targets=family.targets(model),
        vocab=family.vocabulary,
        generator=torch.Generator().manual_seed(derive_seed(seed, task_index, 1)),
        weight_decay=job["train"]["weight_decay"],
        task_index=task_index,
        device=session.device,
        previous_state=task.stored_state(task_index - 1) if task_index > 1 else None,
        theta_0=lambda: family.pretrained(cfg).model,
        forward=session.forward,
        task_loss=session.task_loss,
        stored_state=task.stored_state,
        stored_update=task.stored_update,
        total_steps=session.total,
        steps_per_epoch=session.steps_per_epoch,
        micro_batches_per_step=session.micro_batches_per_step,
        micro_batches_per_epoch=session.micro_batches_per_epoch,
        task_batches=lambda: (batch for micro_batches in session.batches(0) for batch in micro_batches),
        cfg=cfg,
        method_name=method_name,
        seed=seed,
        task=getattr(session, "task", None),  # CLIP sessions hold their ClassificationTask
        train=job["train"],
        run_summary=task.run_summary,
    )


def fit(task: TrainingTask, method: Method, run: MetricsLog, device, on_step) -> TrainedTask:
    """The training loop: the family's session, the method's hooks, checkpoints, the stored task.

    ``on_step(step)`` is called after every optimizer step (tests use it to simulate a kill)."""
    seed, task_index = task.seed, task.task_index
    hp, started = task.job["train"], time.time()
    session = family_of(task.cfg).fit_session(task.cfg, task.job, task.method_name, seed, task_index, device)
    # theta_{i-1} on its device before the method's setup, whatever the family and backend: what
    # setup allocates beside a parameter (EWC's Fisher and anchor) lives where its gradients will
    model = session.model.to(session.device)
    ctx = task_context(task, session)
    groups = method.setup(ctx)
    backend = session.backend(groups, method)
    if hp["carry_optimizer"] and task_index > 1:  # one optimizer through the stream: task i-1's AdamW state
        shapes = {n: p.shape for n, p in model.named_parameters() if p.requires_grad}
        backend.load_moments(unpack_optimizer_state(ctx.previous_state, shapes, task_index))
    dropout = seed_adapter_dropout(model, session.device)
    total = session.total
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        backend.optimizer, lr_factor(hp["lr_schedule"], total, hp["warmup_steps"], session.steps_per_epoch)
    )
    ckpt_dir = task.checkpoints
    start, history = resume(ckpt_dir, lambda found: backend.load(found, scheduler), run, total)
    if start:
        method.restore_checkpoint(load_method_checkpoint(find_checkpoint(ckpt_dir)), start)

    lead = backend.rank == 0  # one progress report and MLflow curve per task, not one per rank
    bar = progress_bar(total=total, desc=session.description) if lead else None
    if bar is not None:
        bar.update(start)
    model.train()
    step_seconds = []

    def emit(record: dict) -> None:
        if lead:
            run.metrics(record)
            bar.update(1)
            bar.set_postfix(loss=f"{record['loss']:.3f}", refresh=False)

    log = StepLog(history, emit)
    # the fused adapter forward where the precision already departs from fp32; TF32's switch held for
    # the backward passes too, which run outside the autocast
    fuse_adapters(model, fuses_adapters(session.device, hp["precision"]))
    # compiled at its first call; reduce-overhead replays the compiled forward and backward as CUDA graphs
    forward = torch.compile(session.forward, mode=hp["compile_mode"]) if hp["compile"] else session.forward
    graphed = hp["compile"] and hp["compile_mode"] == "reduce-overhead"
    with precision_scope(session.device, hp["precision"]):
        for step, micro_batches in enumerate(session.batches(start), start=start + 1):
            began = time.perf_counter()
            if graphed:  # the last step's graph outputs are dead: the replays may reuse their memory
                torch.compiler.cudagraph_mark_step_begin()
            if dropout is not None:  # masks are a function of (seed, task, step), as the batches are
                dropout.manual_seed(derive_seed(seed, task_index, step, *session.dropout_key))
            session.begin_step(micro_batches)
            for batch in micro_batches:
                with backend.autocast():
                    outputs = forward(model, batch)
                    loss = session.step_loss(batch, outputs)
                    extra = method.extra_loss(ctx, batch, outputs)
                backend.backward(loss if extra is None else loss + extra / len(micro_batches))
            method.before_optimizer_step(ctx)
            backend.step()
            scheduler.step()
            backend.after_step(method, step, total)
            fields = session.step_record()
            log.add(
                {
                    "step": step,
                    "loss": fields.pop("loss"),
                    "lr": scheduler.get_last_lr()[0],
                    **fields,
                    **method.step_metrics(),
                }
            )
            checkpoint = step % hp["checkpoint_every"] == 0 and step < total
            if checkpoint:
                log.flush()
            step_seconds.append(time.perf_counter() - began)
            if checkpoint:
                backend.save(ckpt_dir, step, scheduler, history, method.checkpoint_state())
            if on_step is not None:
                on_step(step)
        began = time.perf_counter()
        log.flush()  # the last step's wait for the device is part of that step
        if step_seconds:
            step_seconds[-1] += time.perf_counter() - began
    fuse_adapters(model, False)
    if bar is not None:
        bar.close()
    carried = pack_optimizer_state(backend.moments()) if hp["carry_optimizer"] else {}
    backend.finalize()
    model.eval()
    if lead:
        update, summary = method.finish(session.trained_model())
        if backend.report():
            summary["distributed"] = backend.report()
        summary["step_seconds"] = sum(step_seconds) / len(step_seconds) if step_seconds else None
        summary = finish_task(task, update, summary, history, started, {**method.state_to_store(), **carried})
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    if backend.world_size > 1:
        torch.distributed.barrier()
        summary = read_json(task.out / SUMMARY_FILE)
    backend.close()
    return TrainedTask(summary, model if session.keeps_model() else None)


def fit_closed_form(task: TrainingTask, method: Method, device) -> dict:
    """A closed-form method's task (RAIL): one pass of the family's frozen features, ``absorb``
    from task i-1's stored state, then the task is stored as any other (no steps, no checkpoint)."""
    from codyra.device import pick_device

    started = time.time()
    device = pick_device(device)
    batches, classes = family_of(task.cfg).feature_pass(task.cfg, task.seed, task.task_index, task.job["train"], device)
    previous = task.stored_state(task.task_index - 1) if task.task_index > 1 else None
    began = time.perf_counter()
    method.absorb(previous, batches, classes, task.seed)
    update, summary = method.finish(None)
    summary["fit_seconds"] = time.perf_counter() - began
    return finish_task(task, update, summary, [], started, method.state_to_store())


def finish_task(task: TrainingTask, update, summary, history, started, state=None) -> dict:
    """Write the task's update, method state, history and summary (atomically, summary last);
    return the summary."""
    out = task.out
    summary = {
        **summary_defaults(summary),
        **task.placement,
        "task": task.cfg["tasks"][task.task_index - 1],
        "job": task.job,
        "update_kind": update.kind,
        "steps": len(history),
        "final_loss": history[-1]["loss"] if history else None,
        "seconds": round(time.time() - started, 3),
        "torch_threads": torch.get_num_threads(),  # CPU numbers depend on it (codyra.device.use_threads)
        "codyra_version": __version__,
        "settings": task.settings,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / HISTORY_FILE, "".join(json.dumps(r) + "\n" for r in history))
    summary = save_update(out, update, summary, state or {})
    log.info("task %d done in %.1fs: %s", task.task_index, summary["seconds"], out)
    return summary
