"""Train task i of a CLIP benchmark with one method and seed, starting from theta_{i-1}.

Supervised loss (paper setup): image->text cross-entropy over the current task's classes,
prompts built with the task's first template, logits scaled by the model's logit scale.
``loss: official`` adds the official code's text->image term. AdamW with cosine decay
(optional linear warm-up) per optimizer step; ``train.precision`` picks fp32 (the released
code) or bf16 autocast on a GPU.

Resumable: every ``checkpoint_every`` steps the trainable state, optimizer, scheduler and
history go to ``task{i}/checkpoint``; batches and augmentations are pure functions of
(seed, task, step), so a resumed run ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from codyra import __version__
from codyra.adapters.lora import seed_adapter_dropout
from codyra.benchmarks import build_tasks
from codyra.checkpoint import find_checkpoint, load_checkpoint, save_checkpoint
from codyra.clip.targets import CLIP_VOCABULARY, clip_targets
from codyra.clip.zeroshot import encode_prompts
from codyra.config import resolve_job
from codyra.io import write_text
from codyra.methods import build_method
from codyra.paths import HISTORY_FILE, task_dir
from codyra.progress import progress_bar
from codyra.schedules import warmup_cosine
from codyra.state import autocast, pick_device, rebuild_clip, require_updates
from codyra.tracking import JobRun, train_final_metrics, train_run
from codyra.updates import load_update, save_update

log = logging.getLogger(__name__)


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from integer parts (stable across processes and platforms)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(2, np.uint64)[0] >> np.uint64(1))


class StepBatches(torch.utils.data.Sampler):
    """Batches of (index, aug_seed) keys for steps ``start..total-1``: epoch-wise permutations
    of the training set, each a pure function of (seed, task, epoch)."""

    def __init__(self, n: int, batch_size: int, seed: int, task: int, start: int, total: int):
        self.n, self.batch_size, self.seed, self.task, self.start, self.total = n, batch_size, seed, task, start, total
        self._perms: dict[int, list[int]] = {}

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch not in self._perms:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, self.task, epoch))
            self._perms = {epoch: torch.randperm(self.n, generator=gen).tolist()}
        return self._perms[epoch]

    def batch(self, step: int) -> list[tuple[int, int]]:
        keys = []
        for position in range(step * self.batch_size, (step + 1) * self.batch_size):
            epoch, offset = divmod(position, self.n)
            keys.append((int(self._permutation(epoch)[offset]), derive_seed(self.seed, self.task, position, 7)))
        return keys

    def __iter__(self):
        return (self.batch(step) for step in range(self.start, self.total))

    def __len__(self):
        return self.total - self.start


def supervised_loss(
    image_emb, text_emb, labels, logit_scale, variant: str, seen_classes: int = 0, image_trains: bool = True
):
    """Image->text cross-entropy over the current task's classes (``paper``); ``official`` adds the
    released code's text->image term (Artificer-AI-Lab/CoDyRA, models/codyra.py, train_model).

    That term is a cross-entropy of the text->image logits, one row per class prompt the released
    code builds (the ``seen_classes`` prompts of earlier tasks, then the current ones), against the
    unnormalised 0/1 mask "image b has class c", averaged over all those rows. A row without an
    image in the batch (every seen class) contributes 0 but counts in the mean, so only the current
    rows are computed. The released code adds it only when the image tower is adapted
    (target_encoder vision or all): ``image_trains``.
    """
    logits = logit_scale * image_emb @ text_emb.T  # (batch, classes)
    loss = F.cross_entropy(logits, labels)
    if variant == "official" and image_trains:
        classes = torch.arange(len(text_emb), device=labels.device)
        mask = (classes[:, None] == labels[None, :]).to(logits.dtype)  # (classes, batch)
        rows = -(mask * logits.T.log_softmax(dim=1)).sum(dim=1)
        loss = loss + rows.sum() / (seen_classes + len(text_emb))
    return loss


@dataclass
class TrainedTask:
    summary: dict
    model: torch.nn.Module | None  # theta_i in memory (None for methods that never train)


def train_task(cfg: dict, method_name: str, seed: int, task_index: int, *, device=None, on_step=None) -> TrainedTask:
    """Train and merge one task; write ``update.safetensors`` + ``summary.json`` (+ MLflow mirror).

    ``on_step(step)`` is called after every optimizer step (tests use it to simulate a kill).
    """
    job = resolve_job(cfg, method_name, task_index)
    torch.set_num_threads(job["train"]["threads"])
    method = build_method(job["method"])
    if method.trains:
        require_updates(cfg, method_name, seed, task_index - 1)
    run = JobRun(cfg, **train_run(cfg, method_name, seed, task_index), params=job, system_metrics=True)
    try:
        if method.trains:
            trained = _fit_function(cfg)(cfg, method_name, method, seed, task_index, job, run, device, on_step)
        else:
            update, summary = method.finish(None)
            trained = TrainedTask(finish_task(cfg, method_name, seed, task_index, job, update, summary, [], time.time()), None)
    except BaseException:
        run.fail()
        raise
    run.finish(train_final_metrics(trained.summary))
    return trained


def hand_over(cfg: dict, method_name: str, method, seed: int, task_index: int) -> None:
    """Give a method whose state carries across tasks (SeqLoRA) the previous task's stored update."""
    if method.carries_state and task_index > 1:
        method.previous = load_update(task_dir(cfg, method_name, seed, task_index - 1))


def _fit_function(cfg: dict):
    """The training loop of the model family: CLIP (below) or causal LM (codyra.llm.train)."""
    if cfg["model"]["family"] == "causal_lm":
        from codyra.llm.train import fit_lm_task  # imported here: it imports this module

        return fit_lm_task
    return fit_clip_task


def fit_clip_task(cfg, method_name, method, seed, task_index, job, run, device, on_step) -> TrainedTask:
    hp, started = job["train"], time.time()
    out = task_dir(cfg, method_name, seed, task_index)
    device = pick_device(device)
    bundle = rebuild_clip(cfg, method_name, seed, task_index - 1)
    tasks = build_tasks(cfg, bundle.image)
    task = tasks[task_index - 1]
    seen_classes = sum(t.num_classes for t in tasks[: task_index - 1])  # the official loss's seen rows
    model = bundle.model.to(device)
    generator = torch.Generator().manual_seed(derive_seed(seed, task_index, 1))
    hand_over(cfg, method_name, method, seed, task_index)
    groups = method.setup(model, clip_targets(model), CLIP_VOCABULARY, generator, hp["weight_decay"])
    model.to(device).train()
    dropout = seed_adapter_dropout(model, device)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    # fused: one kernel for all parameters instead of a loop over hundreds of small adapter tensors
    optimizer = torch.optim.AdamW(groups, lr=hp["lr"], betas=tuple(hp["betas"]), eps=hp["eps"], fused=True)
    total = hp["iterations"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(total, hp["warmup_steps"]))

    ckpt_dir = out / "checkpoint"
    start, history = 0, []
    found = find_checkpoint(ckpt_dir)
    if found is not None:
        start, history = load_checkpoint(found, params=params, optimizer=optimizer, scheduler=scheduler)
        log.info("resumed %s from step %d/%d", found, start, total)

    tokens = bundle.tokenizer(task.prompts(task.templates[0])).to(device)
    text_trains = any(p.requires_grad for n, p in model.named_parameters() if not n.startswith("visual."))
    image_trains = any(p.requires_grad for n, p in model.named_parameters() if n.startswith("visual."))
    fixed_text = None
    if not text_trains:
        with torch.no_grad(), autocast(device, hp["precision"]):
            fixed_text = encode_prompts(model, bundle.tokenizer, task.prompts(task.templates[0]), device)

    dataset = task.train_set()
    sampler = StepBatches(len(dataset), hp["batch_size"], seed, task_index, start, total)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=cfg["data"]["num_workers"],
        pin_memory=device.type == "cuda",
    )
    bar = progress_bar(total=total, desc=f"{cfg['benchmark']}/{method_name}/seed{seed}/task{task_index} {task.name}")
    bar.update(start)
    logit_scale = model.logit_scale.exp().detach()
    for step, (images, labels) in enumerate(loader, start=start + 1):
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        if dropout is not None:  # masks are a function of (seed, task, step), as the batches are
            dropout.manual_seed(derive_seed(seed, task_index, step))
        with autocast(device, hp["precision"]):
            image_emb = F.normalize(model.encode_image(images).float(), dim=-1)
            text_emb = fixed_text if fixed_text is not None else F.normalize(model.encode_text(tokens).float(), dim=-1)
            loss = supervised_loss(image_emb, text_emb, labels, logit_scale, hp["loss"], seen_classes, image_trains)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        method.after_step(step, total)
        record = {"step": step, "loss": loss.item(), "lr": scheduler.get_last_lr()[0], **method.step_metrics()}
        history.append(record)
        run.metrics(record)
        bar.update(1)
        bar.set_postfix(loss=f"{record['loss']:.3f}", refresh=False)
        if step % hp["checkpoint_every"] == 0 and step < total:
            save_checkpoint(ckpt_dir, step=step, params=params, optimizer=optimizer, scheduler=scheduler, history=history)
        if on_step is not None:
            on_step(step)
    bar.close()
    model.eval()
    update, summary = method.finish(model)
    summary = finish_task(cfg, method_name, seed, task_index, job, update, summary, history, started)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    return TrainedTask(summary, model)


def finish_task(cfg, method_name, seed, task_index, job, update, summary, history, started) -> dict:
    """Write the task's update, summary and history (atomically, summary last); return the summary."""
    out = task_dir(cfg, method_name, seed, task_index)
    summary = {
        **summary,
        "benchmark": cfg["benchmark"],
        "method": method_name,
        "seed": seed,
        "task_index": task_index,
        "task": cfg["tasks"][task_index - 1]["name"],
        "job": job,
        "update_kind": update.kind,
        "steps": len(history),
        "final_loss": history[-1]["loss"] if history else None,
        "seconds": round(time.time() - started, 3),
        "codyra_version": __version__,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / HISTORY_FILE, "".join(json.dumps(r) + "\n" for r in history))
    save_update(out, update, summary)
    log.info("task %d done in %.1fs: %s", task_index, summary["seconds"], out)
    return summary

