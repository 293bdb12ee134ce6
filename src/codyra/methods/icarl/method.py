"""iCaRL (Rebuffi et al., CVPR 2017) on CLIP as ZSCL's MTIL code runs it (Thunderbeee/ZSCL
``mtil/scripts/icarl.sh``, ``mtil/src/models/icarl.py``, ``mtil/src/dynamic_dataset.py``,
``mtil/src/args.py``): full fine-tuning (``--train-mode=whole``: every parameter but the logit
scale) plus distillation from the zero-shot CLIP on a memory of exemplar images of earlier tasks.

The exemplar memory (``DynamicDataset``, ``--memory_size`` 10,000 by default, which icarl.sh keeps):

- the candidates of a task are the first 30,000 images of its training set in dataset order,
  under the evaluation transform (``getNewDataset`` stops at 30,000);
- after task 1 its exemplars are simply the first ``memory_size`` candidates (``update`` with no
  model: no selection);
- after task t >= 2 (t tasks learned), each earlier task's set is cut to its first
  ``memory_size // t`` exemplars (``reduceExampleSet``), and task t's set is chosen by herding
  over the L2-normalised image features of theta_t, the model that just learned it
  (``constructExampleSet``): ``min(memory_size - memory_size // t, candidates)`` exemplars, each
  the candidate whose feature, added to the sum of those chosen, brings their mean closest (in
  squared distance) to the mean of all candidates' features; a chosen candidate leaves the pool.
  The reference then stores ``new_dataset[index]`` with ``index`` the position in the *shrunken*
  feature array, so after the first pick the stored image is in general not the chosen one (and
  may repeat): option ``herding``, ``reference`` (that) or ``exact`` (the chosen image).

Training task i >= 2 (``icarl.py`` ``finetune``): the task loss, plus the distillation of ZSCL's
LwF (:func:`codyra.methods.lwf.clip_distillation`, temperature ``--T`` 2) on one batch of
exemplars per step. The teacher is the zero-shot CLIP (``--ref-model`` unset: theta_0), the texts
the current task's class prompts as the teacher encodes them, the images the memory of tasks
1..i-1 in stored order (task by task), in consecutive chunks of ``--batch-size``, the last chunk
shorter, restarted from the first when exhausted (``helpers.batch``). Task 1 is plain fine-tuning
(``pure_finetune``). icarl.py sets the learning rate per dataset (5e-5 on Aircraft and MNIST, 1e-5
otherwise): the configs' per-task lists.

icarl.sh passes neither ``--image_loss`` nor ``--text_loss``, so ``icarl.py`` computes the
distillation but never adds it: as scripted, the memory has no effect and iCaRL is plain
fine-tuning. The options ``image_weight`` / ``text_weight`` default to that script (0 and 0: no
distillation, no memory batches read); the configs set 1 and 1, as lwf.sh and ZSCL.sh pass both
flags, which makes it the method the tables name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune
from codyra.methods.lwf import DistillOptions, clip_distillation, frozen_copy
from codyra.methods.options import option

if TYPE_CHECKING:
    import torch

HERDING = ("reference", "exact")
PREFIX = "exemplars."  # state key of task k's exemplars: exemplars.<k>, indices into its training set


@dataclass(frozen=True)
class ICaRLOptions(DistillOptions):
    image_weight: float = option(
        0.0, minimum=0, doc="weight of the image->text rows (icarl.sh passes no --image_loss: 0; lwf.sh, ZSCL.sh: 1)"
    )
    text_weight: float = option(
        0.0, minimum=0, doc="weight of the text->image columns (icarl.sh passes no --text_loss: 0; lwf.sh, ZSCL.sh: 1)"
    )
    memory_size: int = option(
        10000, minimum=1, doc="exemplars kept over all learned tasks (ZSCL args.py --memory_size 10000)"
    )
    candidates: int = option(
        30000, minimum=1, doc="a task's first training images the exemplars are drawn from (dynamic_dataset.py 30000)"
    )
    herding: str = option(
        "reference",
        choices=HERDING,
        doc="reference: the image stored for a herding pick is the candidate at the pick's position in the "
        "shrunken pool, as ZSCL's dynamic_dataset.py; exact: the picked image (iCaRL's herding)",
    )


def memory_sizes(memory_size: int, learned: int) -> tuple[int, int]:
    """(size each earlier task's set is cut to, size of the newest task's set) once ``learned``
    tasks are learned (t >= 2): ZSCL's ``K // t`` (``reduceExampleSet``) and ``K - K // t``
    (``constructExampleSet``), so the memory may hold more than K exemplars."""
    if learned < 2:
        raise ValueError(f"the memory is reduced from the second learned task on, got {learned}")
    return memory_size // learned, memory_size - memory_size // learned


def herding(features: torch.Tensor, count: int, mode: str) -> list[int]:
    """The exemplars of ``count`` herding steps over ``features`` (n, d), as row indices.

    Step k picks the remaining row f minimising ||mu - (S + f) / (k + 1)||^2, mu the mean of all
    rows, S the sum of the rows picked so far (first minimum on ties, as numpy's argmin), then
    removes it. ``exact`` returns the picked rows; ``reference`` returns, as ZSCL's
    dynamic_dataset.py indexes the candidate images, each pick's position among the rows still
    remaining when it was picked."""
    import torch

    if mode not in HERDING:
        raise ValueError(f"unknown herding mode {mode!r}; choose one of {', '.join(HERDING)}")
    f = features.double()
    mean = f.mean(dim=0)
    alive = torch.ones(len(f), dtype=torch.bool, device=f.device)
    chosen = torch.zeros_like(mean)
    picks = []
    for k in range(min(count, len(f))):
        distance = ((mean - (f + chosen) / (k + 1)) ** 2).sum(dim=1)
        distance[~alive] = float("inf")
        row = int(torch.argmin(distance))
        picks.append(row if mode == "exact" else int(alive[:row].sum()))
        chosen += f[row]
        alive[row] = False
    return picks


def stored_memory(state: dict[str, torch.Tensor] | None) -> dict[int, torch.Tensor]:
    """Task index -> its exemplars (indices into its training set), in task order."""
    if not state:
        return {}
    memory = {}
    for key, value in state.items():
        if not key.startswith(PREFIX) or not key[len(PREFIX) :].isdigit() or value.dim() != 1:
            raise ValueError(f"iCaRL's stored state holds {key!r} {tuple(value.shape)}: rerun the previous task")
        memory[int(key[len(PREFIX) :])] = value.long()
    return dict(sorted(memory.items()))


def distillation_chunk(total: int, batch_size: int, step: int) -> tuple[int, int]:
    """[start, stop) of the memory's exemplars distilled at optimizer step ``step`` (1-based):
    consecutive chunks of ``batch_size`` over ``total`` exemplars, the last shorter, restarting
    after the last (ZSCL helpers.py ``batch``, re-created when exhausted)."""
    if total < 1 or batch_size < 1 or step < 1:
        raise ValueError(f"need exemplars, a batch size and a 1-based step, got {total}, {batch_size}, {step}")
    chunks = -(-total // batch_size)
    start = ((step - 1) % chunks) * batch_size
    return start, min(start + batch_size, total)


class ICaRL(FullFineTune):
    kind = "icarl"
    families = ("clip",)
    paper_row = "iCaRL"
    after_step_rewrites_parameters = False  # after_step counts steps
    Options = ICaRLOptions

    def setup(self, ctx):
        from codyra.methods.icarl.clip import MemoryImages

        groups = super().setup(ctx)
        self.memory = stored_memory(ctx.previous_state)
        if len(self.memory) != ctx.task_index - 1:
            raise ValueError(
                f"iCaRL's task {ctx.task_index} needs the exemplars of tasks 1..{ctx.task_index - 1}, "
                f"the stored state has tasks {list(self.memory)}: rerun the previous task"
            )
        self.candidates = ctx.task.train_eval_set()  # the exemplar candidates: evaluation transform
        self.device, self.batch_size, self.workers = ctx.device, ctx.train["batch_size"], ctx.cfg["data"]["num_workers"]
        self.step, self.total, self.teacher, self.images, self.stream = 0, ctx.total_steps, None, None, None
        if self.memory and (self.options.image_weight or self.options.text_weight):
            bundle = ctx.family.pretrained(ctx.cfg)  # --ref-model unset: the zero-shot CLIP distils
            self.teacher = frozen_copy(bundle.model.to(ctx.device))
            self.images = MemoryImages(ctx.cfg, bundle.image, self.memory, ctx.seed)
        return groups

    def extra_loss(self, ctx, batch, outputs):
        import torch

        from codyra.methods._distillation.clip import image_embeddings, logit_scale

        smoothing = super().extra_loss(ctx, batch, outputs)
        if self.images is None:  # task 1, or no distillation (both weights 0)
            return smoothing
        if self.stream is None:  # built at the first step after setup or a resume
            from codyra.methods.icarl.clip import memory_batches

            chunks = [
                distillation_chunk(len(self.images), self.batch_size, s) for s in range(self.step + 1, self.total + 1)
            ]
            self.stream = memory_batches(self.images, chunks, self.workers)
        images = next(self.stream).to(ctx.device, non_blocking=True)
        with torch.no_grad():
            teacher = ctx.forward(self.teacher, {"images": images})
        o = self.options
        loss = clip_distillation(
            image_embeddings(ctx.model, images),
            teacher["image_features"],
            teacher["text_features"],  # the current task's class prompts, as theta_0 encodes them
            logit_scale(self.teacher),
            o.temperature,
            o.image_weight,
            o.text_weight,
        )
        return loss if smoothing is None else loss + smoothing

    def after_step(self, step, total_steps):
        self.step = step

    def restore_checkpoint(self, state, step):
        self.step, self.stream = step, None

    def finish(self, model):
        import torch

        from codyra.methods.icarl.clip import normalized_features

        update, summary = super().finish(model)  # model is theta_i from here on
        o, learned = self.options, len(self.memory) + 1
        candidates = min(len(self.candidates), o.candidates)
        if learned == 1:  # DynamicDataset.update without a model: the first candidates as they come
            memory = {1: torch.arange(min(o.memory_size, candidates))}
        else:
            keep, new = memory_sizes(o.memory_size, learned)
            features = normalized_features(
                model, self.candidates, candidates, self.batch_size, self.device, self.workers
            )
            memory = {k: v[:keep] for k, v in self.memory.items()}
            memory[learned] = torch.tensor(herding(features, new, o.herding), dtype=torch.long)
        self.state = {f"{PREFIX}{k}": v.long().contiguous() for k, v in memory.items()}
        self.teacher = self.images = self.stream = self.candidates = None
        summary["exemplars"] = {str(k): len(v) for k, v in memory.items()}
        return update, summary

    def state_to_store(self):
        return self.state


METHOD = ICaRL
