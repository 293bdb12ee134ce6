"""TreeLoRA (Qian et al. 2025, ZinYY/TreeLoRA ``model/Regular/Tree_LoRA.py`` and its
``utils/kd_lora_tree.py``): per task a new LoRA whose down-projections are pulled towards those
of the most similar earlier task, chosen per layer by a bandit over a gradient-similarity tree.

What the reference computes (its "grads" are the LoRA A matrices themselves, one per adapted
matrix = one tree "depth"):
- every round (micro-batch there, optimizer step here) it adds n_depth * A_d / T to the task's
  accumulator (``insert_grad`` adds the whole stack once per depth: the factor n_depth);
- from task 2 on, ``tree_search``: per (earlier task k, depth d) the mean of the negative L1
  distances |acc_d - G_k,d|_1 recorded for past picks, minus the LCB bonus
  sqrt(log(2 T (t+1)(t+2))) / sqrt(2 n_kd + 1e-5), negated, plus its minimum; a first task is
  sampled from softmax(row sums); the tree root's child holding it multiplies its tasks' rows
  by min(its median similarity, 1.5) (1 for a leaf); the matrix is divided by (max - min +
  1e-5); per depth an earlier task is sampled from the softmax over tasks; picks are counted and
  their L1 distances recorded. As written, the code ranks distance + bonus, so its softmax favours
  the earlier task whose accumulator is *farther* in L1 (the paper describes the nearer one); we
  follow the code;
- the regulariser R = -sum_d <A_d, G_{k_d},d> enters as loss - tmp_reg * L * R / (R + 1e-5)
  (R and L detached in the denominator and factor), tmp_reg = reg * t / T ramping over the task;
- after the task, the tree: task k's vector is G_k - G_{k-1} (G_1 itself); a node at depth d
  splits its tasks by similarity to their mean at depth d, >= median left, < median right
  (an empty side splits the list in halves), down to depth n_depth or single tasks.

Where it differs: the reference restarts the accumulator, bandit statistics and the ramp every
epoch and keeps the last epoch's; a task here is one pass of ``T`` optimizer steps. Its adapter
is never merged between tasks (``loranew`` continues); here each task's LoRA merges like
O-LoRA's, and the earlier tasks' accumulators are this method's stored state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option


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
        left = [t for t, s in zip(tasks, similarities.tolist()) if s >= self.median]
        right = [t for t, s in zip(tasks, similarities.tolist()) if s < self.median]
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
        sim = -(sim - bonus / torch.sqrt(2 * self.counts + 1e-5))
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
    """R = -sum_d <A_d, G_{picks[d]}, d> (the reference's ``tree_lora_loss``)."""
    terms = [-(a.reshape(-1) * previous[d][k]).sum() for d, (a, k) in enumerate(zip(A, picks))]
    return sum(terms[1:], terms[0])


def scaled_regularizer(R, task_loss, tmp_reg: float):
    """``get_loss``: R / (R + 1e-5) * L * tmp_reg with R, L detached where the reference detaches."""
    return R / (R.detach() + 1e-5) * task_loss.detach() * tmp_reg


@dataclass(frozen=True)
class TreeLoRAOptions(LoRAOptions):
    reg: float = option(0.5, minimum=0, doc="final weight of the tree regulariser (ramped over the task)")


class TreeLoRA(LoRA):
    kind = "treelora"
    after_step_rewrites_parameters = False  # after_step counts rounds
    Options = TreeLoRAOptions

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        self.ctx, self.task_index, self.total = ctx, ctx.task_index, ctx.total_steps
        self.names = [t.name for t in self.targets]
        self.previous = self._previous(ctx)
        self.previous_on_device = (
            None if self.previous is None else [p.to(ctx.device, torch.float32) for p in self.previous]
        )
        self.accumulated = [torch.zeros(self.adapters[n].A.numel(), dtype=torch.float64) for n in self.names]
        self.rounds, self.picks = 0, None
        generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=ctx.generator)))
        self.bandit = None
        if self.previous is not None:
            self.bandit = TreeBandit(self.previous, build_tree(self.previous), self.total, generator)
        return groups

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
        A = [self.adapters[n].A for n in self.names]
        if self.picks is None:  # the step's first micro-batch: the reference's insert_grad and tree_search
            for acc, a in zip(self.accumulated, A):
                acc += len(A) * a.detach().reshape(-1).double().cpu() / self.total
            if self.bandit is not None:
                self.picks = self.bandit.search(self.rounds, self.accumulated)
        if self.bandit is None:
            return None
        tmp_reg = self.options.reg * self.rounds / self.total
        R = tree_regularizer(A, self.previous_on_device, self.picks)
        return -scaled_regularizer(R, ctx.task_loss(batch, outputs), tmp_reg)

    def after_step(self, step, total_steps):
        self.rounds, self.picks = self.rounds + 1, None

    def checkpoint_state(self):
        """The accumulators so far and, from task 2 on, the bandit's statistics and its sampling
        stream (the tree and earlier accumulators are rebuilt from stored state; rounds = steps)."""
        state = {f"{n}.accumulated": acc for n, acc in zip(self.names, self.accumulated, strict=True)}
        if self.bandit is not None:
            b = self.bandit
            state.update({"bandit.sim": b.sim, "bandit.counts": b.counts, "bandit.generator": b.generator.get_state()})
        return state

    def restore_checkpoint(self, state, step):
        self.rounds = step
        for n, acc in zip(self.names, self.accumulated, strict=True):
            acc.copy_(state[f"{n}.accumulated"])
        if self.bandit is not None:
            self.bandit.sim.copy_(state["bandit.sim"])
            self.bandit.counts.copy_(state["bandit.counts"])
            self.bandit.generator.set_state(state["bandit.generator"])

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
