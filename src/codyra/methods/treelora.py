"""TreeLoRA (Qian et al. 2025, ZinYY/TreeLoRA ``model/Regular/Tree_LoRA.py`` and its
``utils/kd_lora_tree.py``): a LoRA whose down-projections are pulled, on each task, towards those
of the most similar earlier task, chosen per layer by a bandit over a gradient-similarity tree.

What the reference computes (its "grads" are the LoRA A matrices themselves, one per adapted
matrix = one tree "depth"), every epoch anew (``Tree_LoRA.py`` ``train_one_task`` calls
``new_epoch_init``: the accumulator, the bandit statistics and the round counter restart, and
T = the epoch's micro-batches, ``len(train_dataloader)``):
- every round (one micro-batch, ``kd_lora_tree.step()`` then ``insert_grad``) it adds
  n_depth * A_d / T to the task's accumulator (``insert_grad`` adds the whole stack once per
  depth: the factor n_depth);
- from task 2 on, every round, ``tree_search``: per (earlier task k, depth d) the mean of the
  negative L1 distances |acc_d - G_k,d|_1 recorded for past picks, minus the LCB bonus
  sqrt(log(2 T (t+1)(t+2))) / sqrt(2 n_kd + 1e-5) (t: the round, from 0), negated, plus its
  minimum; a first task is sampled from softmax(row sums); the tree root's child holding it
  multiplies its tasks' rows by min(its median similarity, 1.5) (1 for a leaf); the matrix is
  divided by (max - min + 1e-5); per depth an earlier task is sampled from the softmax over
  tasks; picks are counted and their L1 distances recorded. As written, the code ranks
  distance + bonus, so its softmax favours the earlier task whose accumulator is *farther* in
  L1 (the paper describes the nearer one); we follow the code;
- the regulariser R = -sum_d <A_d, G_{k_d},d> enters the micro-batch's loss as
  loss - tmp_reg * L * R / (R + 1e-5) (R and L detached in the denominator and factor),
  tmp_reg = reg * t / T ramping over the epoch;
- after the task (``end_task``), the last epoch's accumulator is the task's G_k, and the tree:
  task k's vector is G_k - G_{k-1} (G_1 itself); a node at depth d splits its tasks by
  similarity to their mean at depth d, >= median left, < median right (an empty side splits
  the list in halves), down to depth n_depth or single tasks.

Here an epoch is ``steps_per_epoch`` optimizer steps and T = steps_per_epoch x
gradient_accumulation micro-batches. The earlier tasks' accumulators are this method's stored
state. ``adapter: stream`` (the default) trains one adapter through all tasks, never merged
or re-initialised, as the reference does (``training/main.py`` wraps the model with peft once;
``loranew`` continues from task to task): :class:`~codyra.methods.seqlora.CarriedAdapter`.
``adapter: per_task_merge`` is our variant: each task learns a fresh LoRA, merged after the
task like O-LoRA's. The reference also keeps one optimizer through all tasks:
``train.carry_optimizer``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option
from codyra.methods.seqlora import ADAPTER_MODES, CarriedAdapter


class TreeNode:
    """One node of the reference's ``KDTreeNode`` over per-depth task vectors ``vectors[d]`` (tasks x D_d)."""

    def __init__(self, tasks: list[int], depth: int, vectors: list):
        import torch

        self.tasks, self.depth = tasks, depth
        self.left = self.right = None
        self.median = None
        if depth >= len(vectors) or len(tasks) <= 1:
            return
        rows = vectors[depth][tasks]
        similarities = rows @ rows.mean(dim=0)
        self.median = torch.median(similarities).item()
        left = [t for t, s in zip(tasks, similarities.tolist(), strict=True) if s >= self.median]
        right = [t for t, s in zip(tasks, similarities.tolist(), strict=True) if s < self.median]
        if not left or not right:
            left, right = tasks[: len(tasks) // 2], tasks[len(tasks) // 2 :]
        self.left, self.right = TreeNode(left, depth + 1, vectors), TreeNode(right, depth + 1, vectors)


def build_tree(task_grads: list) -> TreeNode:
    """The tree after a task: ``task_grads[d]`` (tasks x D_d), differenced along tasks."""
    import torch

    diffs = [torch.cat([g[:1], g[1:] - g[:-1]]) for g in task_grads]
    return TreeNode(list(range(task_grads[0].shape[0])), 0, diffs)


class TreeBandit:
    """The per-task search state of ``KD_LoRA_Tree`` (``tree_search`` and ``update_similarity``)."""

    def __init__(self, previous: list, root: TreeNode | None, total_rounds: int, generator):
        import torch

        self.previous = previous  # per depth: (earlier tasks x D_d)
        self.root, self.total_rounds, self.generator = root, total_rounds, generator
        n_tasks, n_depth = previous[0].shape[0], len(previous)
        self.sim = torch.zeros(n_tasks, n_depth, dtype=torch.float64)
        self.counts = torch.zeros(n_tasks, n_depth, dtype=torch.float64)

    def probabilities(self, rounds: int):
        """(first-pick distribution over tasks, per-depth distributions (tasks x depth))."""
        import torch

        sim = self.sim.clone()
        seen = self.counts > 0
        sim[seen] = sim[seen] / self.counts[seen]
        bonus = math.sqrt(math.log(2 * self.total_rounds * (rounds + 1) * (rounds + 2)))
        sim = -(sim - bonus * torch.rsqrt(2 * self.counts + 1e-5))
        sim = sim + sim.min()
        return torch.softmax(sim.sum(dim=1), dim=0), sim

    def search(self, rounds: int, current: list) -> list[int]:
        """Pick an earlier task per depth; record the picks' L1 distances to ``current``."""
        import torch

        first_probs, sim = self.probabilities(rounds)
        first = int(torch.multinomial(first_probs, 1, generator=self.generator))
        if self.root is not None and self.root.left is not None:
            node = self.root.left if first in self.root.left.tasks else self.root.right
            sim[node.tasks] *= min(node.median if node.median is not None else 1.0, 1.5)
        sim = sim / (sim.max() - sim.min() + 1e-5)
        picks = torch.multinomial(torch.softmax(sim, dim=0).T, 1, generator=self.generator).reshape(-1).tolist()
        for depth, task in enumerate(picks):
            self.counts[task, depth] += 1
            self.sim[task, depth] -= float((current[depth] - self.previous[depth][task]).abs().sum())
        return picks


def tree_regularizer(A: list, previous: list, picks: list[int]):
    """R = -sum_d <A_d, G_{picks[d]}, d> (the reference's ``tree_lora_loss``), G (kept in fp32) in A's
    dtype, which DeepSpeed's bf16 casts after ``setup``."""
    terms = [-(a.reshape(-1) * previous[d][k].to(a)).sum() for d, (a, k) in enumerate(zip(A, picks, strict=True))]
    return sum(terms[1:], terms[0])


def scaled_regularizer(R, task_loss, tmp_reg: float):
    """``get_loss``: R / (R + 1e-5) * L * tmp_reg with R, L detached where the reference detaches."""
    return R / (R.detach() + 1e-5) * task_loss.detach() * tmp_reg


@dataclass(frozen=True)
class TreeLoRAOptions(LoRAOptions):
    reg: float = option(0.5, minimum=0, doc="final weight of the tree regulariser (ramped over each epoch)")
    adapter: str = option(
        "stream",
        choices=ADAPTER_MODES,
        doc="stream: one adapter through all tasks (the reference); "
        "per_task_merge: ours, a fresh LoRA merged after each task",
    )


class TreeLoRA(CarriedAdapter, LoRA):
    kind = "treelora"
    families = ("clip", "causal_lm")
    paper_row = "TreeLoRA"
    after_step_rewrites_parameters = False  # after_step counts steps
    Options = TreeLoRAOptions

    def carries(self) -> bool:
        return self.options.adapter == "stream"

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        self.task_index, self.steps_per_epoch = ctx.task_index, ctx.steps_per_epoch
        self.rounds_per_epoch = (
            ctx.steps_per_epoch * ctx.micro_batches_per_step
        )  # the reference's len(train_dataloader)
        self.names = [t.name for t in self.targets]
        self.previous = self._previous(ctx)
        self.previous_on_device = (
            None if self.previous is None else [p.to(ctx.device, torch.float32) for p in self.previous]
        )
        self.tree = None if self.previous is None else build_tree(self.previous)
        self.generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=ctx.generator)))
        self.steps_done = 0
        self._new_epoch(0)
        return groups

    def _new_epoch(self, epoch: int) -> None:
        """``new_epoch_init``: the accumulator, the bandit statistics and the round counter restart."""
        import torch

        self.epoch, self.round = epoch, -1
        self.accumulated = [torch.zeros(self.adapters[n].A.numel(), dtype=torch.float64) for n in self.names]
        self.bandit = (
            None
            if self.previous is None
            else TreeBandit(self.previous, self.tree, self.rounds_per_epoch, self.generator)
        )

    def _previous(self, ctx):
        """Per depth, the earlier tasks' accumulators (tasks x D_d), or None for task 1."""
        if ctx.task_index == 1:
            return None
        state = ctx.previous_state or {}
        missing = [n for n in self.names if f"{n}.A_tasks" not in state]
        if missing:
            raise ValueError(
                f"treelora: task {ctx.task_index - 1}'s stored accumulators lack {missing[:3]}; retrain it"
            )
        return [state[f"{n}.A_tasks"].double() for n in self.names]

    def extra_loss(self, ctx, batch, outputs):
        """One round per micro-batch: ``step``, ``insert_grad``, then from task 2 on ``tree_search``
        and ``get_loss``."""
        epoch = self.steps_done // self.steps_per_epoch
        if epoch != self.epoch:
            self._new_epoch(epoch)
        self.round += 1
        A = [self.adapters[n].A for n in self.names]
        for acc, a in zip(self.accumulated, A, strict=True):
            acc += len(A) * a.detach().reshape(-1).double().cpu() / self.rounds_per_epoch
        if self.bandit is None:
            return None
        picks = self.bandit.search(self.round, self.accumulated)
        tmp_reg = self.options.reg * self.round / self.rounds_per_epoch
        R = tree_regularizer(A, self.previous_on_device, picks)
        return -scaled_regularizer(R, ctx.task_loss(batch, outputs), tmp_reg)

    def after_step(self, step, total_steps):
        self.steps_done = step

    def checkpoint_state(self):
        """The epoch's accumulators and round counter and, from task 2 on, the bandit's statistics
        and its sampling stream (the tree and earlier accumulators are rebuilt from stored state)."""
        import torch

        state = {f"{n}.accumulated": acc for n, acc in zip(self.names, self.accumulated, strict=True)}
        state["rounds"] = torch.tensor([self.epoch, self.round])
        if self.bandit is not None:
            b = self.bandit
            state.update({"bandit.sim": b.sim, "bandit.counts": b.counts, "bandit.generator": b.generator.get_state()})
        return state

    def restore_checkpoint(self, state, step):
        epoch, rounds = (int(v) for v in state["rounds"])
        self.steps_done = step
        self._new_epoch(epoch)
        self.round = rounds
        for n, acc in zip(self.names, self.accumulated, strict=True):
            acc.copy_(state[f"{n}.accumulated"])
        if self.bandit is not None:
            self.bandit.sim.copy_(state["bandit.sim"])
            self.bandit.counts.copy_(state["bandit.counts"])
            self.generator.set_state(state["bandit.generator"])

    def state_to_store(self):
        import torch

        state = {}
        for d, name in enumerate(self.names):
            mine = self.accumulated[d].float()[None]
            earlier = None if self.previous is None else self.previous[d].float()
            state[f"{name}.A_tasks"] = mine if earlier is None else torch.cat([earlier, mine])
        return state

    def finish(self, model):
        update, summary = super().finish(model)
        # what the reference keeps per earlier task beside the model: one A-sized vector per adapted matrix
        # (the paper's cost, App. "Compute cost": 22.50M, about 10 x 2.21M of A after 5-shot MTIL's 11 tasks)
        kept = sum((self.task_index - 1) * a.A.numel() for a in self.adapters.values())
        return update, {**summary, "inference_extra_params": kept}


METHOD = TreeLoRA
