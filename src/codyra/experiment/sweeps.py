"""Ablation sweeps (config key ``ablations``): a method expanded into variants of the grid.

    ablations:
      kappa_max:                      # the sweep's name (its table: ablation_kappa_max)
        method: codyra                # an entry of method_configs, the variants' base
        vary: {kappa_max: [0.005, 0.01, 0.02]}
      placement_matched:
        method: codyra
        zip: {placement: [attn, mlp], rank: [36, 29], alpha: [36, 29]}

``vary`` crosses its options (every combination of their values); ``zip`` varies its options
together (value k of every list in variant k: the lists have one length). A sweep with both
crosses the combinations of ``vary`` with the rows of ``zip``. Each variant becomes an ordinary
method ``codyra-kappa_max-0.01`` (base options, then the varied ones, named in the order vary,
zip), appended to ``methods``: an ordinary (method, seed) run with its own updates and cells.
Expansion is idempotent (an expanded config expands to itself). The single-task studies
(config key ``single_task``, :mod:`codyra.experiment.single_task`) use the same sweeps.
"""

from __future__ import annotations

import copy
import itertools
import re

from codyra.errors import ConfigError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def value_label(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "_".join(value_label(v) for v in value)
    return _UNSAFE.sub("_", str(value))


def variants(name: str, sweep, where: str | None = None) -> list[tuple[str, dict]]:
    """[(variant method name, {option: value})] of one sweep: the combinations of ``vary`` (in the
    order of their values) crossed with the rows of ``zip``."""
    where = where or f"config key ablations.{name}"
    if not isinstance(sweep, dict) or not isinstance(sweep.get("method"), str):
        raise ConfigError(
            f"{where}: must be a mapping {{method: <method_configs entry>, vary: {{option: [values, ...]}}, "
            "zip: {option: [values, ...]}}"
        )
    vary, together = sweep.get("vary") or {}, sweep.get("zip") or {}
    if not isinstance(vary, dict) or not isinstance(together, dict) or not (vary or together):
        raise ConfigError(
            f"{where}: give vary (options crossed: every combination) and/or zip (options varied together), "
            "each a mapping {option: [values, ...]}"
        )
    for key, block in (("vary", vary), ("zip", together)):
        for option, values in block.items():
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{where}.{key}.{option}: must be a non-empty list of values")
    if both := sorted(set(vary) & set(together)):
        raise ConfigError(f"{where}: option(s) {', '.join(both)} in both vary and zip; keep each in one of them")
    lengths = {option: len(values) for option, values in together.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{o}: {n}" for o, n in lengths.items())
        raise ConfigError(
            f"{where}.zip: lists of unequal lengths ({listed}); zip varies its options together "
            "(value k of every list in variant k), so give every list the same length, or cross them in vary"
        )
    rows = list(zip(*together.values(), strict=True)) if together else [()]
    options = [*vary, *together]
    out = []
    for combo in itertools.product(*vary.values()):
        for row in rows:
            values = (*combo, *row)
            label = "-".join(f"{o}-{value_label(v)}" for o, v in zip(options, values, strict=True))
            out.append((f"{sweep['method']}-{label}", dict(zip(options, values, strict=True))))
    return out


def add_variants(cfg: dict, where: str, sweep: dict) -> list[str]:
    """Add one sweep's variants to ``cfg["method_configs"]`` (in place); their names."""
    configs = cfg.get("method_configs")
    base = sweep.get("method") if isinstance(sweep, dict) else None
    names = []
    for variant, options in variants("", sweep, where):
        if not isinstance(configs, dict) or base not in configs:
            raise ConfigError(f"{where}.method: {base!r} is not an entry of method_configs")
        spec = {**copy.deepcopy(configs[base]), **copy.deepcopy(options)}
        if variant in configs and configs[variant] != spec:
            raise ConfigError(
                f"{where}: variant {variant!r} is already a different entry of method_configs; rename one"
            )
        configs[variant] = spec
        names.append(variant)
    return names


def expand_ablations(cfg: dict) -> None:
    """Add every sweep's variants to ``method_configs`` and ``methods``, in place."""
    sweeps = cfg.get("ablations") or {}
    if not isinstance(sweeps, dict):
        raise ConfigError("config key ablations: must map sweep names to {method, vary, zip}")
    for name, sweep in sweeps.items():
        for variant in add_variants(cfg, f"config key ablations.{name}", sweep):
            if isinstance(cfg.get("methods"), list) and variant not in cfg["methods"]:
                cfg["methods"].append(variant)


def variant_names(cfg: dict) -> set[str]:
    """Every method a sweep of ``cfg`` generated."""
    return {name for sweep in (cfg.get("ablations") or {}) for name, _ in sweep_methods(cfg, sweep)}


def sweep_methods(cfg: dict, name: str) -> list[tuple[str, dict]]:
    """The variants of sweep ``name`` of an expanded config."""
    return variants(name, cfg["ablations"][name])
