"""What a rehearsal shrinks: a paper config's sizes, and nothing else.

A rehearsal runs the config's own DAG, methods, per-task values, precision, backend, profile and
``paper`` target; :func:`shrink` turns the config as written (``extends`` resolved, before
validation) into the rehearsal's, changing only sizes:

- the stream: its first ``SMALL_TASKS`` tasks and its first seed (``full``: every task and seed);
- the ablation sweeps and the single-task studies' sweeps: the first value of each varied option
  (``full``: every value), and a norm-matched run's target methods those of them that still run;
- steps: every ``iterations`` at most ``ITERATIONS``, every warm-up at most one step, ZSCL's weight
  ensembling every ``ENSEMBLE_EVERY`` steps (so it still happens within the shrunk task), a
  checkpoint every ``CHECKPOINT_EVERY`` steps (so resumable checkpoints are written mid-task);
- RAIL's random-feature expansion at most ``HIDDEN_DIM`` wide (its regression is that width squared);
- causal LMs: ``GENERATED_TOKENS`` new tokens per answer, two DeepSpeed ranks (over gloo on a CPU);
- CPU threads and data-loading workers: one each (2 cores).

Learning rates, schedules, precisions, batch sizes, epochs, method options and placements stay
as the config states them: those are what the rehearsal checks.
"""

from __future__ import annotations

import copy

SMALL_TASKS = 2  # task 2 is where every method first reads what task 1 stored
ITERATIONS = 4
CHECKPOINT_EVERY = 2
ENSEMBLE_EVERY = 2
HIDDEN_DIM = 256
GENERATED_TOKENS = 8
RANKS = 2


def shrink(raw: dict, *, full: bool = False) -> dict:
    """The rehearsal's config: ``raw`` (a config as written, ``extends`` resolved) with only its
    sizes shrunk, as the module docstring lists."""
    cfg = copy.deepcopy(raw)
    if not full:
        cfg["seeds"] = cfg["seeds"][:1]
        cfg["tasks"] = cfg["tasks"][:SMALL_TASKS]
        cfg["task_settings"] = {t: s for t, s in (cfg.get("task_settings") or {}).items() if t in cfg["tasks"]}
        for sweep in _sweeps(cfg):
            _first_values(sweep)
        _keep_running_targets(cfg)
    for train in _train_blocks(cfg):
        _shrink_steps(train)
    for spec in _method_layers(cfg):
        if spec.get("ensemble_every") is not None:
            spec["ensemble_every"] = min(spec["ensemble_every"], ENSEMBLE_EVERY)
        if spec.get("hidden_dim"):
            spec["hidden_dim"] = min(spec["hidden_dim"], HIDDEN_DIM)
    train = cfg.setdefault("train", {})
    train["threads"] = 1
    train["checkpoint_every"] = CHECKPOINT_EVERY
    cfg.setdefault("eval", {})["threads"] = 1
    data = cfg.setdefault("data", {})
    if data.get("num_workers"):
        data["num_workers"] = 1
    if cfg.get("model", {}).get("family") == "causal_lm":
        llm = cfg.setdefault("llm", {})
        llm["max_new_tokens"] = min(llm.get("max_new_tokens", GENERATED_TOKENS), GENERATED_TOKENS)
        deepspeed = llm.setdefault("deepspeed", {})
        if deepspeed.get("enabled"):
            deepspeed["nproc"] = RANKS
    return cfg


def _sweeps(cfg: dict) -> list[dict]:
    """The ablation sweeps and the single-task studies' sweeps."""
    sweeps = list((cfg.get("ablations") or {}).values())
    studies = ((cfg.get("single_task") or {}).get("studies") or {}).values()
    return sweeps + [sweep for study in studies for sweep in study.get("sweeps") or []]


def _first_values(sweep: dict) -> None:
    for key in ("vary", "zip"):
        for option, values in (sweep.get(key) or {}).items():
            sweep[key][option] = values[:1]


def _keep_running_targets(cfg: dict) -> None:
    """A norm-matched method's ``norm_target`` (methods whose updates' norms set its target) cut to
    those the shrunk sweeps still generate (as written where none is generated: the method does not
    run, as in a config that drops the sweeps)."""
    from codyra.experiment.sweeps import variants

    running = set(cfg.get("method_configs") or {}) | {name for sweep in _sweeps(cfg) for name, _ in variants("", sweep)}
    for spec in (cfg.get("method_configs") or {}).values():
        targets = spec.get("norm_target")
        if isinstance(targets, list) and any(name in running for name in targets):
            spec["norm_target"] = [name for name in targets if name in running]


def _method_layers(cfg: dict) -> list[dict]:
    """Every method config layer: method_configs.<m> and task_settings.<t>.methods.<m>."""
    layers = list((cfg.get("method_configs") or {}).values())
    layers += [spec for task in _task_layers(cfg) for spec in (task.get("methods") or {}).values()]
    return layers


def _train_blocks(cfg: dict) -> list[dict]:
    """Every train block a job's settings resolve from (codyra.experiment.resolve.resolve_job's layers)."""
    blocks = [cfg.get("train") or {}]
    blocks += [layer["train"] for layer in _method_layers(cfg) if layer.get("train")]
    blocks += [task["train"] for task in _task_layers(cfg) if task.get("train")]
    return blocks


def _task_layers(cfg: dict) -> list[dict]:
    return list((cfg.get("task_settings") or {}).values())


def _shrink_steps(train: dict) -> None:
    if train.get("iterations") is not None:
        train["iterations"] = min(train["iterations"], ITERATIONS)
    if train.get("warmup_steps"):
        train["warmup_steps"] = min(train["warmup_steps"], 1)
    if train.get("checkpoint_every") is not None:
        train["checkpoint_every"] = CHECKPOINT_EVERY


def changes(raw: dict, shrunk: dict) -> dict:
    """The keys of ``shrunk`` that differ from ``raw``, as a config overlay (mappings merged, every
    other value, lists included, replaced, null removing a mapping: codyra.experiment.config.overlay)."""
    out = {key: None for key, before in raw.items() if key not in shrunk and isinstance(before, dict)}
    for key, value in shrunk.items():
        before = raw.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            nested = changes(before, value)
            if nested:
                out[key] = nested
        elif value != before or key not in raw:
            out[key] = copy.deepcopy(value)
    return out
