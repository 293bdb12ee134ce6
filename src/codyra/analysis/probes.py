"""Forward probes of a run's final model theta_N, each its own job (one per method and seed).

- Interpolation (paper table "supp_interp"): theta_alpha = (1 - alpha) theta_0 + alpha theta_N
  = theta_0 + alpha * (update_1 + ... + update_N), built by applying every stored update scaled
  by alpha in task order, evaluated on the held-out tasks. alpha = 1 is exactly the rebuilt
  theta_N and alpha = 0 exactly theta_0: their accuracies are the held-out files H_N and H_0,
  not computed again.
- Remove trained modules (paper figure "prune_motivation"): theta_N without the parts of every
  update that change one encoder (``remove_towers``: ``text`` / ``vision``), or without the
  trained modules of one type (``remove_modules``: a placement such as ``[vision, v]``, the
  vision encoder's V projections, or ``[text, mlp]``; low-rank updates), evaluated on the
  stream's tasks and the held-out tasks. A single-task study's runs (config key single_task)
  take the same probe on their one task and reference tasks.

Each probe writes ``results/{benchmark}/{method}/seed{seed}/probes/{probe}.json`` with the
digests of the updates it used.
"""

from __future__ import annotations

import logging
import time

import torch

from codyra import __version__
from codyra.analysis.probe_files import interp_name, probed_alphas, remove_name, without_name
from codyra.device import use_threads
from codyra.family import family_of
from codyra.store.io import ResultError, read_json, write_json
from codyra.store.paths import SUMMARY_FILE, probe_path, task_dir
from codyra.store.updates import TaskUpdate, apply_update, load_update

log = logging.getLogger(__name__)


def scaled(update: TaskUpdate, alpha: float) -> TaskUpdate:
    """The update times alpha (adapters: their gates, so dW = B diag(alpha w) A)."""
    if update.kind == "lora":
        tensors = {k: v * alpha if k.endswith(".w") else v for k, v in update.tensors.items()}
    else:
        tensors = {k: v * alpha for k, v in update.tensors.items()}
    return TaskUpdate(update.kind, tensors, update.targets)


def clip_tower(param: str) -> str:
    """The CLIP encoder a backbone parameter belongs to (open_clip: the image tower is ``visual.*``)."""
    return "vision" if param.startswith("visual.") else "text"


def without_tower(update: TaskUpdate, tower: str) -> TaskUpdate:
    """The update minus its entries that change ``tower``'s parameters."""
    if update.kind == "lora":
        targets = {n: w for n, w in update.targets.items() if clip_tower(w["param"]) != tower}
        tensors = {k: v for k, v in update.tensors.items() if k.rsplit(".", 1)[0] in targets}
        return TaskUpdate("lora", tensors, targets)
    return TaskUpdate(update.kind, {k: v for k, v in update.tensors.items() if clip_tower(k) != tower})


def without_modules(update: TaskUpdate, placement) -> TaskUpdate:
    """A low-rank update minus the targets ``placement`` selects (paper Fig. prune_motivation:
    the trained LoRA modules of one type removed); every other target unchanged."""
    from codyra.adapters.targets import select_targets
    from codyra.clip.targets import CLIP_VOCABULARY, stored_target

    if update.kind != "lora":
        raise ValueError(
            f"module removal takes trained low-rank modules out of an update; this update is {update.kind!r}: "
            "list only adapter methods (lora, codyra) where remove_modules applies"
        )
    stored = [stored_target(name, where["param"], where["rows"]) for name, where in update.targets.items()]
    removed = {t.name for t in select_targets(stored, placement, CLIP_VOCABULARY)}
    targets = {n: w for n, w in update.targets.items() if n not in removed}
    tensors = {k: v for k, v in update.tensors.items() if k.rsplit(".", 1)[0] in targets}
    return TaskUpdate("lora", tensors, targets)


def probe_model(cfg: dict, method: str, seed: int, transform, method_class):
    """theta_0 plus ``transform(update_i)`` for i = 1..N in task order, handed to the ``for_inference``
    hook of the method (of class ``method_class``) with the stored method states as theta_N is for
    its cells; and the updates' digests."""
    from codyra.clip.model import pretrained_clip
    from codyra.store.model_states import for_inference, require_updates

    n = len(cfg["tasks"])
    dirs = require_updates(cfg, method, seed, n)
    bundle = pretrained_clip(cfg)
    for d in dirs:
        apply_update(bundle.model, transform(load_update(d)))
    return for_inference(cfg, method, seed, n, bundle, method_class), [
        read_json(d / SUMMARY_FILE)["update_digest"] for d in dirs
    ]


@torch.no_grad()
def evaluate_probe(cfg: dict, bundle, stream: bool, device) -> dict:
    """Accuracies of a built model: {"heldout": {name: acc}} and, if ``stream``, {"tasks": {name: acc}}."""
    from codyra.clip.evaluate import class_hits, hits_on_task
    from codyra.clip.streams import build_heldout_tasks, build_tasks

    out = {
        "heldout": {
            t.name: class_hits(bundle, t, [t], cfg, device).accuracy for t in build_heldout_tasks(cfg, bundle.image)
        }
    }
    if stream:
        tasks = build_tasks(cfg, bundle.image)
        out["tasks"] = {t.name: hits_on_task(bundle, tasks, j, cfg, device).accuracy for j, t in enumerate(tasks, 1)}
    return out


def run_probes(cfg: dict, method: str, seed: int, *, device=None) -> list[dict]:
    """Every interpolation and module-removal probe of (method, seed); returns the written records."""
    from codyra.device import pick_device
    from codyra.methods import method_of

    family = family_of(cfg)
    if "probes" in family.inapplicable_analyses:
        raise ValueError(
            "the interpolation and module-removal probes apply to CLIP benchmarks (model.family: clip), "
            f"not to {family.name}: {family.inapplicable_analyses['probes']}"
        )
    if not cfg["heldout_tasks"]:
        raise ValueError("config key heldout_tasks is empty: the probes evaluate on held-out tasks; list some")
    use_threads(cfg["eval"]["threads"])
    device = pick_device(device)
    probes = [(interp_name(a), {"alpha": a}, lambda u, a=a: scaled(u, a), False) for a in probed_alphas(cfg)]
    probes += [
        (remove_name(t), {"removed": t}, lambda u, t=t: without_tower(u, t), True)
        for t in cfg["analysis"]["remove_towers"]
    ]
    probes += [
        (without_name(p), {"removed_modules": p}, lambda u, p=p: without_modules(u, p), True)
        for p in cfg["analysis"]["remove_modules"]
    ]
    records, method_class = [], method_of(cfg, method)
    for name, fields, transform, stream in probes:
        started = time.time()
        bundle, digests = probe_model(cfg, method, seed, transform, method_class)
        record = {
            "probe": name,
            **fields,
            **evaluate_probe(cfg, bundle, stream, device),
            "benchmark": cfg["benchmark"],
            "method": method,
            "seed": seed,
            "update_digests": digests,
            "seconds": round(time.time() - started, 3),
            "codyra_version": __version__,
        }
        write_json(probe_path(cfg, method, seed, name), record)
        log.info("probe %s of %s seed %d: %s", name, method, seed, record["heldout"])
        records.append(record)
    return records


def read_probe(cfg: dict, method: str, seed: int, name: str) -> dict:
    """A probe record, refused when the run's updates changed since it was computed."""
    path = probe_path(cfg, method, seed, name)
    if not path.is_file():
        raise FileNotFoundError(f"probe result {path} missing: run snakemake {path}")
    record = read_json(path)
    n = len(cfg["tasks"])
    current = [read_json(task_dir(cfg, method, seed, i) / SUMMARY_FILE).get("update_digest") for i in range(1, n + 1)]
    if record.get("update_digests") != current or record.get("probe") != name:
        raise ResultError(
            f"probe result {path} was computed from other updates than the run's current ones (stale); "
            f"delete it and rerun: snakemake -f {path}"
        )
    return record
