"""The CLIP side of CL-LoRA (``codyra.methods.cl_lora.method``): the shared and task-specific
LoRA in the attention of CLIP's image tower, the shared blocks' forward the distillation reads,
the stored state, and the cells of a row.

A task's method state holds everything inference needs after that task: the shared LoRA
(``shared.<target>.A`` frozen down-projection, ``.B`` up-projection), every learned task's
specific LoRA (``branch.<k>.<target>.A`` / ``.B``) and block weights (``branch.<k>.block_weights``,
rows q, k, v by columns of specific blocks).
"""

from __future__ import annotations

import re
import time

import torch
import torch.nn.functional as F
from torch import nn

from codyra.adapters.attach import attach_adapters, detach_adapters
from codyra.adapters.lora import RankSelectiveLoRA
from codyra.device import autocast
from codyra.methods._routing import class_domains, route_learned
from codyra.methods._routing.clip import routed_cells
from codyra.methods.cl_lora.losses import PROJECTIONS

ROUTER = "argmax"  # the task of the argmax class (the reference logs its accuracy as "Task correct")
_ATTRIBUTE = "cl_lora"  # where the modules sit on the image tower while they are attached


def _key(name: str) -> str:
    return name.replace(".", "/")  # a ModuleDict key holds no "."


def random_orthonormal(rows: int, columns: int, generator: torch.Generator) -> torch.Tensor:
    """(rows x columns) with orthonormal rows: the transposed Q of QR(U[0, 1)^(columns x rows)),
    ``Adapter_lora``'s down-projection (``torch.linalg.qr(torch.rand(n_embd, down_size))``)."""
    q, _ = torch.linalg.qr(torch.rand(columns, rows, generator=generator))
    return q.T.contiguous()


def new_lora(features: int, rank: int, generator: torch.Generator, trains_down: bool) -> RankSelectiveLoRA:
    """A LoRA pair: down-projection A random orthonormal, up-projection B zero, no scaling."""
    lora = RankSelectiveLoRA(features, features, rank, alpha=rank, gated=False)
    with torch.no_grad():
        lora.A.copy_(random_orthonormal(rank, features, generator))
    lora.A.requires_grad_(trains_down)
    lora.B.requires_grad_(False)
    return lora


class CLLoRAModules(nn.Module):
    """The shared LoRA (and, from task 2, its copy after the previous task: the teacher), every
    task's specific LoRA and block weights, and what the attached slots read: ``branch`` (the
    task whose specific LoRA runs, 0-based; None: none) and ``use_teacher``."""

    def __init__(self, targets: dict[str, tuple[bool, int, int]], split: int):
        super().__init__()
        self.targets = targets  # name -> (shared, projection index, specific-block column; -1 when shared)
        self.split = split  # the blocks before this one carry the shared LoRA
        self.shared = nn.ModuleDict()
        self.teacher = nn.ModuleDict()
        self.branches = nn.ModuleList()
        self.block_weights: nn.ParameterList | None = None
        self.branch: int | None = None
        self.use_teacher = False


class _SharedSlot(nn.Module):
    def __init__(self, modules: CLLoRAModules, name: str):
        super().__init__()
        self._modules_ref, self.key = (modules,), _key(name)  # a tuple: not registered twice

    def forward(self, x):
        m = self._modules_ref[0]
        return (m.teacher if m.use_teacher else m.shared)[self.key](x)


class _SpecificSlot(nn.Module):
    def __init__(self, modules: CLLoRAModules, name: str, projection: int, column: int):
        super().__init__()
        self._modules_ref, self.key, self.projection, self.column = (modules,), _key(name), projection, column

    def forward(self, x):
        m = self._modules_ref[0]
        if m.branch is None:
            return x.new_zeros(())
        out = m.branches[m.branch][self.key](x)
        if m.block_weights is None:
            return out
        return m.block_weights[m.branch][self.projection, self.column].to(out.dtype) * out


def vision_targets(model, options) -> tuple[dict, int, int]:
    """({target name: (shared, projection index, specific column)}, shared blocks, blocks) for
    the adapted projections of the image tower's attention."""
    from codyra.clip.targets import clip_targets

    blocks = len(model.visual.transformer.resblocks)
    split = options.shared_blocks if options.shared_blocks is not None else blocks // 2
    if not 1 <= split < blocks:
        raise ValueError(
            f"cl_lora: shared_blocks must leave task-specific blocks in the {blocks}-block image tower "
            f"(1..{blocks - 1}), got {split}"
        )
    chosen = {}
    for t in clip_targets(model):
        if t.tower != "vision" or t.kind not in options.projections:
            continue
        block = int(re.search(r"\.resblocks\.(\d+)\.", t.name).group(1))
        chosen[t.name] = (block < split, PROJECTIONS.index(t.kind), block - split if block >= split else -1)
    return chosen, split, blocks


def attach(model, options, state: dict | None, task_index: int, generator: torch.Generator) -> CLLoRAModules:
    """The modules after task ``task_index - 1`` (``state``; None for task 1) plus task
    ``task_index``'s new branch, attached to ``model``'s image tower."""
    targets, split, blocks = vision_targets(model, options)
    modules = _build(model, options, targets, split, state, task_index - 1)
    width = model.visual.transformer.width
    if task_index > 1:
        for name, lora in modules.shared.items():  # the teacher: the shared LoRA as task i-1 left it
            frozen = RankSelectiveLoRA(width, width, options.rank, alpha=options.rank, gated=False)
            frozen.load_state_dict(lora.state_dict())
            modules.teacher[name] = frozen.requires_grad_(False)
    else:
        for name, (shared, _, _) in targets.items():
            if shared:
                modules.shared[_key(name)] = new_lora(width, options.rank, generator, trains_down=False)
    modules.branches.append(
        nn.ModuleDict(
            {
                _key(name): new_lora(width, options.rank, generator, trains_down=True)
                for name, (shared, _, _) in targets.items()
                if not shared
            }
        )
    )
    if modules.block_weights is not None:
        modules.block_weights.append(
            nn.Parameter(torch.empty(3, blocks - split).uniform_(0.5, 1.5, generator=generator))
        )
    modules.branch = task_index - 1
    _attach_slots(model, modules)
    return modules


def _build(model, options, targets, split: int, state: dict | None, learned: int) -> CLLoRAModules:
    """The modules of ``learned`` tasks from a stored state (frozen), without attaching them."""
    modules = CLLoRAModules(targets, split)
    if options.block_weights:
        modules.block_weights = nn.ParameterList()
    if not learned:
        return modules
    if state is None:
        raise ValueError(f"cl_lora: the stored state of task {learned} is missing; rerun its training")
    stored = sum(1 for k in state if re.fullmatch(r"branch\.\d+\.block_weights", k))
    branches = len({k.split(".")[1] for k in state if k.startswith("branch.")})
    if branches != learned or (options.block_weights and stored != learned):
        raise ValueError(
            f"cl_lora: the stored state of task {learned} holds {branches} branches ({stored} block weights), "
            f"expected {learned}: rerun the training with these options"
        )
    width = model.visual.transformer.width

    def loaded(prefix: str) -> RankSelectiveLoRA:
        lora = RankSelectiveLoRA(width, width, options.rank, alpha=options.rank, gated=False)
        try:
            with torch.no_grad():
                lora.A.copy_(state[f"{prefix}.A"])
                lora.B.copy_(state[f"{prefix}.B"])
        except (KeyError, RuntimeError) as err:
            raise ValueError(
                f"cl_lora: stored state has no {prefix} of rank {options.rank} ({err}); rerun its training"
            ) from err
        return lora.requires_grad_(False)

    for name, (shared, _, _) in targets.items():
        if shared:
            modules.shared[_key(name)] = loaded(f"shared.{name}")
    for k in range(learned):
        modules.branches.append(
            nn.ModuleDict({_key(n): loaded(f"branch.{k}.{n}") for n, (shared, _, _) in targets.items() if not shared})
        )
        if modules.block_weights is not None:
            modules.block_weights.append(nn.Parameter(state[f"branch.{k}.block_weights"].clone(), requires_grad=False))
    return modules


def _attach_slots(model, modules: CLLoRAModules) -> None:
    from codyra.clip.targets import clip_targets

    chosen = [t for t in clip_targets(model) if t.name in modules.targets]
    slots = {
        t.name: _SharedSlot(modules, t.name)
        if modules.targets[t.name][0]
        else _SpecificSlot(modules, t.name, *modules.targets[t.name][1:])
        for t in chosen
    }
    attach_adapters(model, chosen, slots)
    setattr(model.visual, _ATTRIBUTE, modules)  # registers its parameters with the model


def detach(model) -> None:
    """Put the image tower back as it was (theta_0)."""
    detach_adapters(model)
    delattr(model.visual, _ATTRIBUTE)


def stored_state(modules: CLLoRAModules) -> dict[str, torch.Tensor]:
    state = {}
    for name, (shared, _, _) in modules.targets.items():
        if shared:
            lora = modules.shared[_key(name)]
            state |= {f"shared.{name}.A": lora.A, f"shared.{name}.B": lora.B}
        else:
            for k, branch in enumerate(modules.branches):
                state |= {f"branch.{k}.{name}.A": branch[_key(name)].A, f"branch.{k}.{name}.B": branch[_key(name)].B}
    if modules.block_weights is not None:
        state |= {f"branch.{k}.block_weights": w for k, w in enumerate(modules.block_weights)}
    return {k: v.detach().float().cpu().contiguous() for k, v in state.items()}


def shared_features(visual, images: torch.Tensor, blocks: int) -> torch.Tensor:
    """The image embedding of the first ``blocks`` blocks alone, then the tower's final norm,
    pooling and projection (``forward_general_cls``: the general blocks, ``norm``, the CLS token)."""
    x = visual._embeds(images)
    transformer = visual.transformer
    if not transformer.batch_first:
        x = x.transpose(0, 1)
    for block in transformer.resblocks[:blocks]:
        x = block(x)
    if not transformer.batch_first:
        x = x.transpose(0, 1)
    pooled, _ = visual._pool(x)
    return pooled @ visual.proj if visual.proj is not None else pooled


def shared_logits(model, modules: CLLoRAModules, images, text_features, teacher: bool) -> torch.Tensor:
    """Logit scale x cosine of the shared blocks' embedding (current shared LoRA, or the teacher's)
    with the task's class embeddings."""
    modules.use_teacher = teacher
    try:
        features = F.normalize(shared_features(model.visual, images, modules.split).float(), dim=-1)
    finally:
        modules.use_teacher = False
    return model.logit_scale.exp().detach() * features @ text_features.T


@torch.no_grad()
def cl_lora_row(cfg: dict, method: str, options, seed: int, i: int, js: list[int], device, state: dict):
    """Yield the cells A[i, j] after task i (``state``): task k's classes scored by branch k, a
    not yet learned task's by the shared LoRA alone or the last branch (``unseen_branch``)."""
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks
    from codyra.clip.zeroshot import label_space_classifier

    started = time.time()
    bundle = pretrained_clip(cfg)
    model = bundle.model
    targets, split, _ = vision_targets(model, options)
    modules = _build(model, options, targets, split, state, i)
    _attach_slots(model, modules)
    model = model.to(device).eval()
    tasks = build_tasks(cfg, bundle.image)
    own_space = cfg["data"]["label_space"] != "union"
    task_of_class = class_domains([t.num_classes for t in tasks])
    unseen = None if options.unseen_branch == "shared" else i - 1
    ev = cfg["eval"]

    def embed(images, branch):
        modules.branch = branch
        with autocast(device, ev["precision"]):
            return F.normalize(model.encode_image(images).float(), dim=-1)

    def classify(j, space):
        classes_task = torch.full((len(space),), j - 1) if own_space else task_of_class
        branch_of = [int(t) if t < i else unseen for t in classes_task.tolist()]
        columns = {b: torch.tensor([c for c, x in enumerate(branch_of) if x == b]) for b in set(branch_of)}
        modules.branch = None
        with autocast(device, ev["precision"]):
            classifier = label_space_classifier(model, bundle.tokenizer, space, device)  # the text tower is theta_0's

        def predict(images):
            logits = torch.empty(len(images), len(space), device=device)
            for branch, cols in columns.items():
                cols = cols.to(device)
                logits[:, cols] = embed(images, branch) @ classifier[cols].T
            predicted = logits.argmax(dim=-1).cpu()
            return predicted, route_learned(classes_task[predicted], i)

        return predict

    yield from routed_cells(cfg, method, seed, i, js, tasks, device, ROUTER, classify, started)
