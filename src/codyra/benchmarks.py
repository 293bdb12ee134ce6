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


def build_heldout_tasks(cfg: dict, image: ImageConfig) -> list[ClassificationTask]:
    """The tasks of config key heldout_tasks (only their test splits are ever read)."""
    kind, names = cfg["data"]["kind"], cfg["heldout_tasks"]
    if kind == "mini":
        from codyra.mini.tasks import build_mini_task

        return [build_mini_task(name, cfg["mini"], image) for name in names]
    if kind in ("mtil", "xtail"):
        from codyra.data.registry import build_task, data_root

        return [build_task(name, kind, data_root(cfg), image) for name in names]
    raise ValueError(f"data.kind {kind!r} has no held-out classification tasks")


def own_pretraining(cfg: dict) -> str | None:
    """The theta_0 file a mini benchmark pretrains itself (`codyra pretrain-mini`), else None."""
    from codyra.paths import MINI_PRETRAINED

    mini = cfg["data"]["kind"] == "mini" or (cfg["model"]["family"] == "causal_lm" and cfg["llm"]["mini"] is not None)
    if mini and cfg["model"]["pretrained"] is None:
        return MINI_PRETRAINED.format(results=cfg["results"], benchmark=cfg["benchmark"])
    return None


def pretrain_own(cfg: dict) -> None:
    """Write the mini benchmark's theta_0 (and, for the mini TRACE, its data and tokenizer)."""
    if own_pretraining(cfg) is None:
        raise ValueError("pretrain-mini applies to the mini benchmarks (data.kind: mini, or llm.mini) with model.pretrained null")
    if cfg["model"]["family"] == "causal_lm":
        from codyra.llm.pretrain import pretrain_mini_lm

        pretrain_mini_lm(cfg)
    else:
        from codyra.mini.pretrain import pretrain_mini

        pretrain_mini(cfg, own_pretraining(cfg))


def pretrained_weights(cfg: dict) -> str | None:
    """The weights theta_0 is loaded from (the mini benchmark's own pretraining by default)."""
    return cfg["model"]["pretrained"] or own_pretraining(cfg)
