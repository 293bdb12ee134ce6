"""From a config to its model and tasks: the one place that knows every benchmark kind."""

from __future__ import annotations

from collections.abc import Sequence

from codyra.tasks import ClassificationTask, ImageConfig


def build_tasks(cfg: dict, image: ImageConfig) -> Sequence[ClassificationTask]:
    """The task stream in config order (lazy: no image is read until a split is requested;
    mtil / xtail tasks read their dataset's metadata on first access)."""
    kind = cfg["data"]["kind"]
    names = [t["name"] for t in cfg["tasks"]]
    if kind == "mini":
        from codyra.mini.tasks import build_mini_task

        return [build_mini_task(name, cfg["mini"], image) for name in names]
    if kind in ("mtil", "xtail"):
        from codyra.data.registry import build_benchmark_tasks

        return build_benchmark_tasks(cfg, image)
    raise ValueError(f"data.kind {kind!r} has no classification tasks (TRACE runs through codyra.llm)")


def pretrained_weights(cfg: dict) -> str | None:
    """The weights theta_0 is loaded from (the mini benchmark's own pretraining by default)."""
    from codyra.paths import MINI_PRETRAINED

    pretrained = cfg["model"]["pretrained"]
    if pretrained is None and cfg["data"]["kind"] == "mini":
        return MINI_PRETRAINED.format(results=cfg["results"], benchmark=cfg["benchmark"])
    return pretrained
