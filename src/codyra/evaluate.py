"""Evaluate one cell A[i, j]: accuracy on task j's test set after training tasks 1..i.

i = 0 is the pretrained model, shared by every method and seed of a benchmark. A row's
cells share one theta_i (built once); the text classifier is built once per cell (once per
(model state, task)); images stream through a DataLoader. Label space ``task`` classifies over task j's own classes (MTIL), ``union``
over the classes of every task of the benchmark (X-TAIL), each class embedded with its
own task's templates.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F

from codyra import __version__
from codyra.benchmarks import build_tasks
from codyra.cells import read_cell
from codyra.clip.zeroshot import label_space_classifier
from codyra.fingerprints import cell_fingerprint, eval_fingerprint
from codyra.io import read_json, write_json
from codyra.methods import method_class
from codyra.paths import PRETRAINED, SUMMARY_FILE, cell_path, row0_cell_path
from codyra.progress import progress_bar
from codyra.state import autocast, pick_device, pretrained_clip, rebuild_clip, require_updates
from codyra.tracking import SETTINGS, JobRun, cell_metrics, cell_run

log = logging.getLogger(__name__)


def _check_indices(cfg: dict, i: int, j: int) -> None:
    n = len(cfg["tasks"])
    if not (0 <= i <= n and 1 <= j <= n):
        raise ValueError(f"cell A[{i},{j}] is outside the grid: i must be in 0..{n}, j in 1..{n}")


def accuracy_on_task(bundle, tasks, j: int, cfg: dict, device) -> tuple[float, int, int]:
    """(top-1 accuracy in %, number of test images, number of classes in the label space) of task j:
    over its own classes, or over every task's (X-TAIL's 1,100) when data.label_space is union."""
    task = tasks[j - 1]
    return accuracy(bundle, task, tasks if cfg["data"]["label_space"] == "union" else [task], cfg, device)


@torch.no_grad()
def accuracy(bundle, task, space_tasks, cfg: dict, device) -> tuple[float, int, int]:
    """``task``'s test accuracy over the classes of ``space_tasks`` (which include it)."""
    from codyra.data.registry import label_space  # imports torchvision: only CLIP cells pay for it

    ev = cfg["eval"]
    model = bundle.model.to(device).eval()
    # The registry's label space, each class with its own dataset's templates; built from
    # theta_i here, never cached.
    space = label_space(space_tasks)
    offset = space.offset(task.name)
    test_set = task.test_set()  # checks its image files first: a broken dataset fails before any compute
    with autocast(device, ev["precision"]):
        classifier = label_space_classifier(model, bundle.tokenizer, space, device)
    loader = torch.utils.data.DataLoader(
        test_set,
        batch_size=ev["batch_size"],
        num_workers=cfg["data"]["num_workers"],
        pin_memory=device.type == "cuda",
    )
    correct = total = 0
    bar = progress_bar(total=len(loader.dataset), desc=f"eval {task.name}")
    for images, labels in loader:
        with autocast(device, ev["precision"]):
            features = model.encode_image(images.to(device, non_blocking=True))
        # fp32 logits: in bf16, near-tied classes of a 1,100-way argmax could swap
        predictions = (F.normalize(features.float(), dim=-1) @ classifier.T).argmax(dim=-1).cpu()
        correct += int((predictions == labels + offset).sum())
        total += len(labels)
        bar.update(len(labels))
    bar.close()
    return 100.0 * correct / total, total, classifier.shape[0]


def tracked(cfg: dict, method: str, seed: int | None, i: int, j: int, compute) -> dict:
    """Run ``compute()`` (which writes the cell file) mirrored by an MLflow cell run."""
    run = JobRun(cfg, **cell_run(cfg, method, seed, i, j))
    try:
        result = compute()
    except BaseException:
        run.fail()
        raise
    run.finish(cell_metrics(result), tags={SETTINGS: result["settings"]})
    return result


def evaluate_row0(cfg: dict, j: int, *, device=None) -> dict:
    """A[0, j] of the pretrained model, written to the benchmark's shared row-0 file."""
    return evaluate_row(cfg, PRETRAINED, None, 0, [j], device=device)[0]


def evaluate_cell(cfg: dict, method: str, seed: int, i: int, j: int, *, device=None) -> dict:
    """A[i, j] for (method, seed), written atomically to the contract path."""
    return evaluate_row(cfg, method, seed, i, [j], device=device)[0]


def evaluate_row(cfg: dict, method: str, seed: int | None, i: int, js=None, *, device=None) -> list[dict]:
    """Cells A[i, j] for every j in ``js`` (default: every task), theta_i built once for the row.

    Method ``pretrained`` (row 0 only) writes the benchmark's shared row-0 files. Row 0 and every
    row of a method that never trains equal the pretrained model's row: those cells are copied
    from the shared row-0 files (computing the missing ones first). Each cell is written
    atomically and mirrored by its own MLflow run, as soon as it is done.
    """
    js = list(range(1, len(cfg["tasks"]) + 1) if js is None else js)
    for j in js:
        _check_indices(cfg, i, j)
    if method == PRETRAINED:
        if i != 0:
            raise ValueError("the pretrained model only has row i = 0")
        cells = _with_settings(cfg, PRETRAINED, None, 0, _computed_cells(cfg, PRETRAINED, None, 0, js, device))
        return [tracked(cfg, PRETRAINED, None, 0, j, lambda j=j: _stored(row0_cell_path(cfg, j), next(cells))) for j in js]
    if method not in cfg["method_configs"]:
        raise ValueError(f"unknown method {method!r}; configured: {', '.join(sorted(cfg['method_configs']))}")
    if i == 0 or not method_class(cfg["method_configs"][method]["kind"]).trains:
        missing = [j for j in js if not row0_cell_path(cfg, j).is_file()]
        if missing:
            evaluate_row(cfg, PRETRAINED, None, 0, missing, device=device)

        def copy(j):
            row0 = row0_cell_path(cfg, j)
            return {**read_cell(cfg, row0, PRETRAINED, None, 0, j), "method": method, "seed": seed, "i": i, "copied_from": str(row0)}

        return [tracked(cfg, method, seed, i, j, lambda j=j: _stored(cell_path(cfg, method, seed, i, j), copy(j))) for j in js]
    cells = _with_settings(cfg, method, seed, i, _computed_cells(cfg, method, seed, i, js, device))
    return [tracked(cfg, method, seed, i, j, lambda j=j: _stored(cell_path(cfg, method, seed, i, j), next(cells))) for j in js]


def _stored(path, result: dict) -> dict:
    write_json(path, result)
    log.info("A[%d,%d] = %.2f (%s)", result["i"], result["j"], result["accuracy"], path)
    return result


def _with_settings(cfg, method, seed, i, cells):
    """The cells with their settings fingerprint: column j's evaluation settings and those the
    summaries of the updates 1..i record (not the config's: an update trained with other
    settings shows here). Read before any cell is computed; fails early if an update is missing."""
    updates = [read_json(d / SUMMARY_FILE).get("settings") for d in require_updates(cfg, method, seed, i)]
    return ({**cell, "settings": cell_fingerprint(eval_fingerprint(cfg, cell["j"]), updates)} for cell in cells)


def _computed_cells(cfg, method, seed, i, js, device):
    """Yield A[i, j] for j in ``js`` of theta_i (theta_0 for the method ``pretrained``), by the
    model family's protocol. A CLIP row builds theta_i and the task list once."""
    if cfg["model"]["family"] == "causal_lm":  # generated answers scored by the task's metric
        from codyra.llm.evaluate import evaluate_lm_cell

        for j in js:
            yield evaluate_lm_cell(cfg, method, seed, i, j, device=device)
        return
    torch.set_num_threads(cfg["eval"]["threads"])
    if method != PRETRAINED and method_class(cfg["method_configs"][method]["kind"]).predicts_domain:
        from codyra.clip.routed import routed_row  # task-agnostic inference: each image routed to a task's model

        for j, acc, n, classes, routing, seconds in routed_row(cfg, method, seed, i, js, pick_device(device)):
            yield {**_cell(cfg, method, seed, i, j, acc, n, classes, time.time() - seconds), "routing": routing}
        return
    started = time.time()  # the first cell's seconds include building the model
    bundle = pretrained_clip(cfg) if method == PRETRAINED else rebuild_clip(cfg, method, seed, i)
    tasks = build_tasks(cfg, bundle.image)
    device = pick_device(device)
    for j in js:
        acc, n, classes = accuracy_on_task(bundle, tasks, j, cfg, device)
        yield _cell(cfg, method, seed, i, j, acc, n, classes, started)
        started = time.time()


def _cell(cfg, method, seed, i, j, acc, n, classes, started) -> dict:
    return {
        "accuracy": acc,
        "benchmark": cfg["benchmark"],
        "method": method,
        "seed": seed,
        "i": i,
        "j": j,
        "task": cfg["tasks"][j - 1]["name"],
        "num_classes": classes,
        "num_samples": n,
        "label_space": cfg["data"]["label_space"],
        "seconds": round(time.time() - started, 3),
        "codyra_version": __version__,
    }
