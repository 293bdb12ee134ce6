"""A job's settings from a validated config: the backbone chosen, then one method on one task.

A job's configuration is resolved from four layers, later ones winning:
``train`` <- ``method_configs[m].train`` <- ``task_settings[t].train`` <- ``task_settings[t].methods[m].train``
(and likewise for method options: ``method_configs[m]`` <- ``task_settings[t].methods[m]``), where
``t`` is the task's name: per-task settings follow their task wherever a stream puts it.
"""

from __future__ import annotations

import copy

from codyra.errors import ConfigError


def select_backbone(cfg: dict) -> None:
    """Resolve ``backbones`` (name -> model id, or {name: model id, leave_out: {method: why}}) and
    ``backbone`` (the chosen name) in place.

    One config then serves every backbone of a benchmark (TRACE: paper Table 2): the choice
    sets ``model.name`` and suffixes ``benchmark``, so each backbone's results live apart
    (results/trace-<backbone>/...). The methods the chosen backbone leaves out (what its jobs cannot
    hold, codyra.experiment.resources) leave ``methods`` for ``left_out`` (method -> why), which the
    tables print. Both keys are consumed, so a resolved config is plain and resolving it again
    changes nothing.
    """
    if "backbones" not in cfg:
        if "backbone" in cfg:
            raise ConfigError("config key backbone: set, but the config has no backbones mapping to choose from")
        return
    backbones, choice = cfg.pop("backbones"), cfg.pop("backbone", None)
    if not isinstance(backbones, dict) or not backbones or not all(map(_backbone_entry, backbones.values())):
        raise ConfigError(
            "config key backbones: must map backbone names to model ids, e.g. {gemma-2b-it: google/gemma-2b-it}, "
            "or to {name: <model id>, leave_out: {<method>: <why>}}"
        )
    if choice not in backbones:
        raise ConfigError(
            f"config key backbone: {choice!r} is not one of backbones ({', '.join(backbones)}); "
            "choose one, e.g. snakemake --config backbone=<name> or codyra --set backbone=<name>"
        )
    model = cfg.setdefault("model", {})
    if "name" in model:
        raise ConfigError("config key model.name: set it or use backbones/backbone, not both")
    entry = backbones[choice] if isinstance(backbones[choice], dict) else {"name": backbones[choice]}
    model["name"] = entry["name"]
    if isinstance(cfg.get("benchmark"), str):  # a missing one is the schema's error to report
        cfg["benchmark"] += f"-{choice}"
    leave_out = entry.get("leave_out", {})
    unknown = sorted(set(leave_out) - set(cfg.get("method_configs") or {}))
    if unknown:
        raise ConfigError(
            f"config key backbones.{choice}.leave_out: {unknown} are not entries of method_configs; name the "
            "methods this backbone leaves out"
        )
    if isinstance(cfg.get("methods"), list):
        cfg["left_out"] = {m: leave_out[m] for m in cfg["methods"] if m in leave_out}
        cfg["methods"] = [m for m in cfg["methods"] if m not in leave_out]


def _backbone_entry(entry) -> bool:
    """A model id, or {name: model id, leave_out: {method: why}} (why: a non-empty sentence)."""
    if isinstance(entry, str):
        return True
    if not isinstance(entry, dict) or set(entry) - {"name", "leave_out"} or not isinstance(entry.get("name"), str):
        return False
    leave_out = entry.get("leave_out", {})
    return isinstance(leave_out, dict) and all(isinstance(why, str) and why.strip() for why in leave_out.values())


def task_settings(cfg: dict, task: str) -> dict:
    """The settings of task ``task`` (by name): its entry of config key task_settings, or none."""
    return (cfg.get("task_settings") or {}).get(task) or {}


def _merged(*layers: dict) -> dict:
    out: dict = {}
    for layer in layers:
        out.update(copy.deepcopy(layer or {}))
    return out


def resolve_job(cfg: dict, method: str, task_index: int) -> dict:
    """Method options and train settings for training task ``task_index`` (1-based) with ``method``."""
    if method not in cfg["method_configs"]:
        raise ConfigError(f"unknown method {method!r}; configured: {', '.join(sorted(cfg['method_configs']))}")
    n = len(cfg["tasks"])
    if not 1 <= task_index <= n:
        raise ConfigError(f"task index {task_index} out of range 1..{n}")
    base = cfg["method_configs"][method]
    task = task_settings(cfg, cfg["tasks"][task_index - 1])
    per_task = task.get("methods", {}).get(method, {})
    options = {k: v for k, v in _merged(base, per_task).items() if k != "train"}
    train = _merged(cfg["train"], base.get("train"), task.get("train"), per_task.get("train"))
    return {"method": options, "train": train}
