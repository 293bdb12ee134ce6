"""The causal-LM side of training one TRACE task (the loop is :mod:`codyra.training.loop`).

Supervised fine-tuning as in TRACE: ``BOS + prompt + answer + EOS`` with the loss on the
answer and EOS only. An optimizer step takes ``train.gradient_accumulation`` micro-batches of
``train.batch_size`` examples (each split over the ranks; TRACE: 1 per GPU x 4 GPUs x 8), and
its loss is averaged over the answer tokens of all of them, so one process and N ZeRO ranks,
with or without accumulation, optimise the same objective. (TRACE averages each micro-batch's
token mean instead; with 1 example per GPU that weights every example equally.) AdamW over
the method's parameter groups, the learning-rate schedule of ``train.lr_schedule`` per optimizer
step, gradient clipping (``llm.gradient_clipping``).
The schedule is set in epochs (``train.epochs``, per task through ``task_settings.<task>.train`` or
``task_settings.<task>.methods[m].train``), or in ``train.iterations`` when ``epochs`` is null.

Two backends: one process with torch AdamW (:class:`codyra.steps.backends.PlainBackend`: CPU,
tests, one GPU), or DeepSpeed ZeRO-2 with ``llm.deepspeed.enabled`` (:mod:`codyra.llm.deepspeed_backend`),
for which ``codyra train`` re-executes itself under torchrun (:mod:`codyra.llm.torchrun`).
Adapter dropout draws from its own generator reseeded from (seed, task, step, rank).
"""

from __future__ import annotations

import math

import torch

from codyra.device import pick_device
from codyra.llm.collate import TrainingCollator
from codyra.llm.loss import answer_loss_sum, answer_tokens, position_ids
from codyra.llm.model import length_limits, task_folder
from codyra.llm.rebuild import rebuild_lm
from codyra.steps.backends import PlainBackend
from codyra.steps.batches import StepBatches
from codyra.steps.optim import examples_per_step
from codyra.trace.data import load_split


def total_steps(hp: dict, num_examples: int) -> int:
    """Optimizer steps of a task: ``epochs`` passes over the training set, else ``iterations``."""
    if hp["epochs"] is None:
        return hp["iterations"]
    return math.ceil(hp["epochs"] * num_examples / examples_per_step(hp))


class LMSession:
    """One LM training job: theta_{i-1}, the task's examples, this rank's micro-batches."""

    def __init__(self, cfg: dict, job: dict, method_name: str, seed: int, task_index: int, device):
        self.hp, self.llm, self.seed, self.task_index = job["train"], cfg["llm"], seed, task_index
        if self.llm["deepspeed"]["enabled"]:
            from codyra.llm.deepspeed_backend import init_distributed

            self.rank, self.world_size, self.device = init_distributed()
        else:
            self.rank, self.world_size, self.device = 0, 1, pick_device(device)
        self.dropout_key = (self.rank,)
        bundle = rebuild_lm(cfg, method_name, seed, task_index - 1)
        self.model, self.tokenizer = bundle.model, bundle.tokenizer
        self.examples = load_split(task_folder(cfg, task_index), "train")
        self.collate = TrainingCollator(bundle.tokenizer, length_limits(cfg))
        self.total = total_steps(self.hp, len(self.examples))
        self.steps_per_epoch = math.ceil(len(self.examples) / examples_per_step(self.hp))
        self.micro_batches_per_step = self.hp["gradient_accumulation"]
        self.micro_batches_per_epoch = math.ceil(len(self.examples) / self.hp["batch_size"])
        task = cfg["tasks"][task_index - 1]
        self.description = f"{cfg['benchmark']}/{method_name}/seed{seed}/task{task_index} {task}"
        self._backend = None

    def backend(self, groups, method):
        if self.llm["deepspeed"]["enabled"]:
            from codyra.llm.deepspeed_backend import ZeroBackend

            self._backend = ZeroBackend(self.model, groups, method, self.hp, self.llm, self.device)
        else:
            self._backend = PlainBackend(
                self.model, groups, self.hp, self.device, clip_norm=self.llm["gradient_clipping"]
            )
        return self._backend

    def batches(self, start: int):
        keys_of = StepBatches(
            len(self.examples), examples_per_step(self.hp), self.seed, self.task_index, start, self.total
        )
        micro, share = self.hp["batch_size"], self.hp["batch_size"] // self.world_size
        for keys in keys_of:
            micro_batches = []
            for first in range(0, len(keys), micro):  # this rank's share of each micro-batch
                mine = keys[first : first + micro][self.rank * share : (self.rank + 1) * share]
                micro_batches.append(
                    {k: v.to(self.device) for k, v in self.collate([self.examples[i] for i, _ in mine]).items()}
                )
            yield micro_batches

    def forward(self, model, batch: dict) -> dict:
        # before the backend exists (a method's setup), the trained model runs as it is
        run = self._backend.forward if model is self.model and self._backend is not None else model
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        return {"logits": run(**inputs, position_ids=position_ids(batch["attention_mask"])).logits}

    def task_loss(self, batch: dict, outputs: dict) -> torch.Tensor:
        total, tokens = answer_loss_sum(outputs["logits"], batch["labels"])
        return total / tokens.clamp(min=1)

    def begin_step(self, micro_batches: list[dict]) -> None:
        """The step's answer tokens on all ranks: every micro-batch's loss is a share of their mean."""
        self._tokens = self._backend.all_sum(
            sum(answer_tokens(m["labels"]) for m in micro_batches).to(self.device, torch.float32)
        )
        self._loss_total = torch.zeros((), device=self.device)

    def step_loss(self, batch: dict, outputs: dict) -> torch.Tensor:
        loss_sum, _ = answer_loss_sum(outputs["logits"], batch["labels"])
        self._loss_total += loss_sum.detach()
        # DeepSpeed averages gradients over ranks, hence the factor world_size.
        return loss_sum * self.world_size / self._tokens

    def step_record(self) -> dict:
        return {"loss": self._backend.all_sum(self._loss_total) / self._tokens, "tokens": self._tokens.long()}

    def trained_model(self):
        # Merge on the CPU in fp32, where theta_i is rebuilt, so both are the same tensors.
        return self.model.to("cpu").float()

    def keeps_model(self) -> bool:
        # Under ZeRO the module's frozen weights were cast to the replica's precision:
        # theta_i is rebuilt by the next job.
        return isinstance(self._backend, PlainBackend)
