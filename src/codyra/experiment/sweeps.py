"""Ablation sweeps (config key ``ablations``): a method expanded into variants of the grid.

    ablations:
      kappa_max:                      # the sweep's name (its table: ablation_kappa_max)
        method: codyra                # an entry of method_configs, the variants' base
        vary: {kappa_max: [0.005, 0.01, 0.02]}

Every combination of the values in ``vary`` becomes an ordinary method ``codyra-kappa_max-0.01``
(base options, then the varied ones), appended to ``methods``: an ordinary (method, seed) run
with its own updates and cells. Expansion is idempotent (an expanded config expands to itself).
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


def variants(name: str, sweep) -> list[tuple[str, dict]]:
    """[(variant method name, {option: value})] of one sweep, in the order of its values."""
    where = f"config key ablations.{name}"
    if (
        not isinstance(sweep, dict)
        or not isinstance(sweep.get("method"), str)
        or not isinstance(sweep.get("vary"), dict)
        or not sweep["vary"]
    ):
        raise ConfigError(
            f"{where}: must be a mapping {{method: <method_configs entry>, vary: {{option: [values, ...]}}}}"
        )
    for option, values in sweep["vary"].items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.vary.{option}: must be a non-empty list of values")
    options = list(sweep["vary"])
    out = []
    for combo in itertools.product(*(sweep["vary"][o] for o in options)):
        label = "-".join(f"{o}-{value_label(v)}" for o, v in zip(options, combo, strict=True))
        out.append((f"{sweep['method']}-{label}", dict(zip(options, combo, strict=True))))
    return out


def expand_ablations(cfg: dict) -> None:
    """Add every sweep's variants to ``method_configs`` and ``methods``, in place."""
    sweeps = cfg.get("ablations") or {}
    if not isinstance(sweeps, dict):
        raise ConfigError("config key ablations: must map sweep names to {method, vary}")
    configs = cfg.get("method_configs")
    for name, sweep in sweeps.items():
        for variant, options in variants(name, sweep):
            base = sweep["method"]
            if not isinstance(configs, dict) or base not in configs:
                raise ConfigError(f"config key ablations.{name}.method: {base!r} is not an entry of method_configs")
            spec = {**copy.deepcopy(configs[base]), **copy.deepcopy(options)}
            if variant in configs and configs[variant] != spec:
                raise ConfigError(
                    f"config key ablations.{name}: variant {variant!r} is already a different entry of method_configs; "
                    "rename one"
                )
            configs[variant] = spec
            if isinstance(cfg.get("methods"), list) and variant not in cfg["methods"]:
                cfg["methods"].append(variant)


def variant_names(cfg: dict) -> set[str]:
    """Every method a sweep of ``cfg`` generated."""
    return {name for sweep in (cfg.get("ablations") or {}) for name, _ in sweep_methods(cfg, sweep)}


def sweep_methods(cfg: dict, name: str) -> list[tuple[str, dict]]:
    """The variants of sweep ``name`` of an expanded config."""
    return variants(name, cfg["ablations"][name])
