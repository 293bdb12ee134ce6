"""Inter-task gradient conflict after SVD truncation to rank rho (paper table "supp_grad_conflict").

At the pretrained model theta_0, each task's supervised loss (the paper's image->text
cross-entropy over its classes) on a fixed probe batch (its first ``analysis.probe_batch``
training examples, augmentation seed 0) gives one gradient per adapted matrix. Each matrix
gradient is truncated to its top-rho singular directions (rho = None: kept whole), the task's
truncated gradients are concatenated into one vector, and the conflict is the mean over task
pairs of |cos| between those vectors (norm-normalised). One job per benchmark.
"""

from __future__ import annotations

import itertools
import statistics
import time

import torch
import torch.nn.functional as F

from codyra import __version__
from codyra.analysis.common import PlainTable, fmt
from codyra.device import use_threads
from codyra.family import family_of
from codyra.store.io import ResultError, read_json, write_json
from codyra.store.paths import GRAD_CONFLICT, results_path


def truncate(g: torch.Tensor, rank: int | None) -> torch.Tensor:
    """The best rank-``rank`` approximation of a matrix (Eckart-Young); the matrix itself for None."""
    if rank is None or rank >= min(g.shape):
        return g
    U, S, Vh = torch.linalg.svd(g.double(), full_matrices=False)
    return ((U[:, :rank] * S[:rank]) @ Vh[:rank]).to(g.dtype)


def mean_abs_cos(vectors: list[torch.Tensor]) -> float:
    if len(vectors) < 2:
        raise ValueError("gradient conflict needs at least two tasks (config key tasks)")
    return statistics.fmean(
        abs(float(F.cosine_similarity(a.double(), b.double(), dim=0))) for a, b in itertools.combinations(vectors, 2)
    )


def conflict(gradients: list[dict[str, torch.Tensor]], rank: int | None) -> float:
    """Mean pairwise |cos| of the tasks' gradients, each matrix truncated to ``rank``."""
    names = sorted(gradients[0])
    return mean_abs_cos([torch.cat([truncate(g[n], rank).reshape(-1) for n in names]) for g in gradients])


def task_gradients(cfg: dict, device) -> list[dict[str, torch.Tensor]]:
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks
    from codyra.clip.targets import clip_targets
    from codyra.clip.train import supervised_loss
    from codyra.store.updates import param_block

    bundle = pretrained_clip(cfg)
    model = bundle.model.to(device).eval()  # eval: no dropout, the gradient of theta_0 as it is
    targets = clip_targets(model)
    params = dict(model.named_parameters())
    out = []
    # shared by the benchmark's runs: with per-seed few-shot subsets (data.fewshot_seed), the first seed's
    for task in build_tasks(cfg, bundle.image, cfg["seeds"][0], cfg["train"]["augmentation"]):
        data = task.train_set()
        batch = [data[(k, 0)] for k in range(min(cfg["analysis"]["probe_batch"], len(data)))]
        images = torch.stack([b[0] for b in batch]).to(device)
        labels = torch.tensor([b[1] for b in batch], device=device)
        model.zero_grad(set_to_none=True)
        image_emb = F.normalize(model.encode_image(images).float(), dim=-1)
        text_emb = F.normalize(
            model.encode_text(bundle.tokenizer(task.prompts(task.templates[0])).to(device)).float(), dim=-1
        )
        supervised_loss(model.logit_scale.exp().detach() * image_emb @ text_emb.T, labels, "paper").backward()
        out.append({t.name: param_block(params[t.param].grad, t.rows).detach().float().cpu().clone() for t in targets})
    return out


def run_conflict(cfg: dict, *, device=None) -> dict:
    from codyra.device import pick_device

    family = family_of(cfg)
    if "conflict" in family.inapplicable_analyses:
        raise ValueError(
            "the gradient-conflict probe applies to CLIP benchmarks (model.family: clip), "
            f"not to {family.name}: {family.inapplicable_analyses['conflict']}"
        )
    use_threads(cfg["eval"]["threads"])
    started = time.time()
    gradients = task_gradients(cfg, pick_device(device))
    ranks = cfg["analysis"]["conflict_ranks"]
    record = {
        "benchmark": cfg["benchmark"],
        "ranks": ranks,
        "mean_abs_cos": [conflict(gradients, r) for r in ranks],
        "probe_batch": cfg["analysis"]["probe_batch"],
        "seconds": round(time.time() - started, 3),
        "codyra_version": __version__,
    }
    write_json(results_path(cfg, GRAD_CONFLICT), record)
    return record


def conflict_table(cfg: dict) -> PlainTable:
    path = results_path(cfg, GRAD_CONFLICT)
    if not path.is_file():
        raise FileNotFoundError(f"gradient-conflict result {path} missing: run snakemake {path}")
    record = read_json(path)
    if (
        record.get("ranks") != cfg["analysis"]["conflict_ranks"]
        or record.get("probe_batch") != cfg["analysis"]["probe_batch"]
    ):
        raise ResultError(
            f"{path} was computed with other analysis.conflict_ranks / probe_batch than the config's; "
            f"rerun: snakemake -f {path}"
        )
    table = PlainTable(
        "grad_conflict",
        f"{cfg['benchmark']}: inter-task gradient conflict at theta_0 after SVD truncation to rank rho, "
        "mean |cos| over task pairs (paper: supp_grad_conflict)",
        ["rank rho", "mean abs. cosine (lower is better)"],
    )
    table.rows = [
        ["full" if r is None else str(r), fmt(v, 4)]
        for r, v in zip(record["ranks"], record["mean_abs_cos"], strict=True)
    ]
    return table
