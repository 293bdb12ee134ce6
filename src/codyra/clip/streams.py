"""From a CLIP config to its classification tasks: the one place that knows every CLIP benchmark kind."""

from __future__ import annotations

from collections.abc import Sequence

from codyra.data.tasks import ClassificationTask, ImageConfig


def build_tasks(
    cfg: dict, image: ImageConfig, seed: int | None = None, augmentation: str = "paper"
) -> Sequence[ClassificationTask]:
    """The task stream in config order (lazy: no image is read until a split is requested;
    mtil / xtail tasks read their dataset's metadata on first access), for run ``seed`` (a per-seed
    few-shot subset's training split needs it; None: a job that reads test splits only), training
    with ``augmentation`` (config key train.augmentation; the minis' images train as they are)."""
    kind = cfg["data"]["kind"]
    names = list(cfg["tasks"])
    if kind == "mini":
        from codyra.data.scenes.tasks import build_mini_task

        return [build_mini_task(name, cfg["mini"], image) for name in names]
    if kind in ("mtil", "xtail"):
        from codyra.data.registry import build_benchmark_tasks

        return build_benchmark_tasks(cfg, image, seed, augmentation)
    raise ValueError(f"data.kind {kind!r} has no classification tasks")


def build_heldout_tasks(cfg: dict, image: ImageConfig) -> list[ClassificationTask]:
    """The tasks of config key heldout_tasks (only their test splits are ever read)."""
    kind, names = cfg["data"]["kind"], cfg["heldout_tasks"]
    if kind == "mini":
        from codyra.data.scenes.tasks import build_mini_task

        return [build_mini_task(name, cfg["mini"], image) for name in names]
    if kind in ("mtil", "xtail"):
        from codyra.data.registry import build_task, data_root
        from codyra.store.paths import eval_cache_dir

        root = data_root(cfg)
        order = cfg["data"]["sun397_order"]
        return [
            build_task(name, kind, root, image, eval_cache=eval_cache_dir(cfg, name), sun397_order=order)
            for name in names
        ]
    raise ValueError(f"data.kind {kind!r} has no held-out classification tasks")
