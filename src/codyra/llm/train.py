"""Train task i of a TRACE benchmark with one method and seed, starting from theta_{i-1}.

Supervised fine-tuning as in TRACE: ``BOS + prompt + answer + EOS`` with the loss on the
answer and EOS only. An optimizer step takes ``train.gradient_accumulation`` micro-batches of
``train.batch_size`` examples (each split over the ranks; TRACE: 1 per GPU x 4 GPUs x 8), and
its loss is averaged over the answer tokens of all of them, so one process and N ZeRO ranks,
with or without accumulation, optimise the same objective. (TRACE averages each micro-batch's
token mean instead; with 1 example per GPU that weights every example equally.) AdamW over
the method's parameter groups, cosine decay per optimizer step, gradient clipping
(``llm.gradient_clipping``).
The schedule is set in epochs (``train.epochs``, per task through ``tasks[i].train`` or
``tasks[i].methods[m].train``), or in ``train.iterations`` when ``epochs`` is null.

Two backends (:mod:`codyra.llm.backends`): one process with torch AdamW (CPU, tests, one
GPU), or DeepSpeed ZeRO-2 with ``llm.deepspeed.enabled``, for which ``codyra train``
re-executes itself under torchrun (:mod:`codyra.llm.launch`).

Resumable like CLIP training: batches are pure functions of (seed, task, step), adapter
dropout draws from its own generator reseeded from (seed, task, step, rank) before every step
(never from torch's global RNG, which jobs running as threads of one process share), and
checkpoints hold the full optimizer state, so a resumed run ends where an uninterrupted one does.
"""

from __future__ import annotations

import logging
import math
import shutil
import time

import torch

from codyra.adapters.lora import seed_adapter_dropout
from codyra.checkpoint import find_checkpoint
from codyra.io import read_json
from codyra.llm.backends import PlainBackend, answer_loss_sum, answer_tokens, position_ids
from codyra.llm.collate import TrainingCollator
from codyra.llm.data import load_split
from codyra.llm.launch import in_distributed_rank, launch_ranks
from codyra.llm.model import length_limits, rebuild_lm, task_folder
from codyra.llm.targets import LM_VOCABULARY, lm_targets
from codyra.paths import SUMMARY_FILE, task_dir
from codyra.progress import progress_bar
from codyra.schedules import warmup_cosine
from codyra.state import pick_device
from codyra.train import StepBatches, TrainedTask, derive_seed, finish_task, hand_over

log = logging.getLogger(__name__)


def step_examples(hp: dict) -> int:
    """Examples per optimizer step: ``batch_size`` x ``gradient_accumulation``."""
    return hp["batch_size"] * hp["gradient_accumulation"]


def total_steps(hp: dict, num_examples: int) -> int:
    """Optimizer steps of a task: ``epochs`` passes over the training set, else ``iterations``."""
    if hp["epochs"] is None:
        return hp["iterations"]
    return math.ceil(hp["epochs"] * num_examples / step_examples(hp))


def optimizer_step(backend, micro_batches: list[dict]) -> tuple[float, int]:
    """One optimizer step over this rank's share of the step's micro-batches, the loss averaged
    over the answer tokens of all micro-batches on all ranks; returns that loss and token count."""
    device = micro_batches[0]["labels"].device
    tokens = backend.all_sum(sum(answer_tokens(m["labels"]) for m in micro_batches).to(device, torch.float32))
    loss_total = torch.zeros((), device=device)
    for inputs in micro_batches:
        with backend.autocast():
            logits = backend.forward(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                position_ids=position_ids(inputs["attention_mask"]),
            ).logits
        loss_sum, _ = answer_loss_sum(logits, inputs["labels"])
        # DeepSpeed averages gradients over ranks, hence the factor world_size.
        backend.backward(loss_sum * backend.world_size / tokens)
        loss_total += loss_sum.detach()
    backend.step()
    return float(backend.all_sum(loss_total) / tokens), int(tokens)


def fit_lm_task(cfg, method_name, method, seed, task_index, job, run, device, on_step) -> TrainedTask:
    """Train, merge and store task ``task_index`` (called by ``codyra.train.train_task``)."""
    if cfg["llm"]["deepspeed"]["enabled"] and not in_distributed_rank():
        return TrainedTask(launch_ranks(cfg, method_name, seed, task_index, run), None)
    hp, started = job["train"], time.time()
    if cfg["llm"]["deepspeed"]["enabled"]:
        from codyra.llm.zero import ZeroBackend, init_distributed

        rank, world_size, device = init_distributed()
        make_backend = ZeroBackend
    else:
        rank, world_size, device, make_backend = 0, 1, pick_device(device), PlainBackend

    bundle = rebuild_lm(cfg, method_name, seed, task_index - 1)
    model, task = bundle.model, cfg["tasks"][task_index - 1]["name"]
    examples = load_split(task_folder(cfg, task_index), "train")
    generator = torch.Generator().manual_seed(derive_seed(seed, task_index, 1))
    hand_over(cfg, method_name, method, seed, task_index)
    groups = method.setup(model, lm_targets(model), LM_VOCABULARY, generator, hp["weight_decay"])
    dropout = seed_adapter_dropout(model, device)
    backend = make_backend(model, groups, method, hp, cfg["llm"], device)
    total = total_steps(hp, len(examples))
    scheduler = torch.optim.lr_scheduler.LambdaLR(backend.optimizer, warmup_cosine(total, hp["warmup_steps"]))

    ckpt_dir = task_dir(cfg, method_name, seed, task_index) / "checkpoint"
    start, history = 0, []
    found = find_checkpoint(ckpt_dir)
    if found is not None:
        start, history = backend.load(found, scheduler)
        log.info("resumed %s from step %d/%d", found, start, total)

    collate = TrainingCollator(bundle.tokenizer, length_limits(cfg))
    batches = StepBatches(len(examples), step_examples(hp), seed, task_index, start, total)
    micro, share = hp["batch_size"], hp["batch_size"] // world_size
    bar = None
    if rank == 0:  # one progress report per task, not one per rank
        bar = progress_bar(total=total, desc=f"{cfg['benchmark']}/{method_name}/seed{seed}/task{task_index} {task}")
        bar.update(start)
    model.train()
    for step in range(start + 1, total + 1):
        keys = batches.batch(step - 1)
        micro_batches = []
        for first in range(0, len(keys), micro):  # this rank's share of each micro-batch
            mine = keys[first : first + micro][rank * share : (rank + 1) * share]
            micro_batches.append({k: v.to(device) for k, v in collate([examples[i] for i, _ in mine]).items()})
        if dropout is not None:
            dropout.manual_seed(derive_seed(seed, task_index, step, rank))
        loss, tokens = optimizer_step(backend, micro_batches)
        scheduler.step()
        backend.after_step(method, step, total)
        lr = scheduler.get_last_lr()[0]
        record = {"step": step, "loss": loss, "lr": lr, "tokens": tokens, **method.step_metrics()}
        history.append(record)
        if rank == 0:
            run.metrics(record)
            bar.update(1)
            bar.set_postfix(loss=f"{record['loss']:.3f}", refresh=False)
        if step % hp["checkpoint_every"] == 0 and step < total:
            backend.save(ckpt_dir, step, scheduler, history)
        if on_step is not None:
            on_step(step)
    if bar is not None:
        bar.close()
    backend.finalize()
    model.eval()
    if rank == 0:
        # Merge on the CPU in fp32, where theta_i is rebuilt, so both are the same tensors.
        update, summary = method.finish(model.to("cpu").float())
        if backend.report():
            summary["distributed"] = backend.report()
        summary = finish_task(cfg, method_name, seed, task_index, job, update, summary, history, started)
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    if world_size > 1:
        torch.distributed.barrier()
        summary = read_json(task_dir(cfg, method_name, seed, task_index) / SUMMARY_FILE)
    backend.close()
    # Under ZeRO the module's frozen weights were cast to the replica's precision: theta_i is rebuilt by the next job.
    return TrainedTask(summary, model if make_backend is PlainBackend else None)
