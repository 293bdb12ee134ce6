"""The job that decodes one dataset's test split into its evaluation cache
(:mod:`codyra.data.eval_cache`), at the resolution of the config's model, for every row to read."""

from __future__ import annotations

import logging

from codyra.family import family_of
from codyra.store.paths import eval_cache_dir

log = logging.getLogger(__name__)


def cached_datasets(cfg: dict) -> list[str]:
    """The datasets whose test splits the config's rows read from a cache: every task, held-out task
    and single-task reference task of an MTIL or X-TAIL benchmark while config key eval.cache is on
    (the minis' test sets are generated in memory, TRACE's are text). Light: the DAG build calls it."""
    if not family_of(cfg).classifies or cfg["data"]["kind"] not in ("mtil", "xtail"):
        return []
    names = list(cfg["tasks"]) + cfg["heldout_tasks"] + cfg["single_task"]["reference_tasks"]
    return [name for name in dict.fromkeys(names) if eval_cache_dir(cfg, name) is not None]


def cache_test_set(cfg: dict, dataset: str) -> dict:
    """Build the evaluation cache of ``dataset`` (a task or held-out task of ``cfg``), decoding with
    ``data.num_workers`` loader processes; returns its manifest."""
    from codyra.data.eval_cache import build_eval_cache
    from codyra.data.registry import build_task, data_root
    from codyra.device import use_threads
    from codyra.store.io import require_writable

    if dataset not in cached_datasets(cfg):
        raise ValueError(
            f"{dataset!r} has no evaluation cache under this config: caches hold the test sets of an MTIL or "
            f"X-TAIL benchmark's tasks and held-out tasks ({', '.join(cached_datasets(cfg)) or 'none here'}), "
            "with config key eval.cache on"
        )
    directory = eval_cache_dir(cfg, dataset)
    require_writable(directory)
    use_threads(cfg["eval"]["threads"])
    image = family_of(cfg).pretrained(cfg).image  # the resolution every row's model takes
    order = cfg["data"]["sun397_order"]
    view = build_task(dataset, cfg["data"]["kind"], data_root(cfg), image, sun397_order=order).test_set()  # fails early
    manifest = build_eval_cache(view.samples, view.transform, directory, workers=cfg["data"]["num_workers"])
    log.info("evaluation cache of %s: %d images of %d px in %s", dataset, manifest["count"], image.size, directory)
    return manifest
