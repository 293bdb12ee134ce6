"""Loading an experiment config: its files, their ``extends`` chain, ``--set`` and ``--config`` values.

A config file may start with ``extends: <file>`` (a path relative to it): the file is then
overlaid onto that base, mappings merged key by key and every other value (lists
included) replaced, so a benchmark's variant states only what differs; bases may extend
further. The stream (``tasks``) is a list of names and per-task settings are keyed by name
(``task_settings``), so a variant reorders or appends tasks without restating their settings.
:mod:`codyra.experiment.validation` fills the defaults and checks what is loaded;
:mod:`codyra.experiment.resolve` resolves a job's settings from it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from codyra.errors import ConfigError
from codyra.experiment.validation import validate_config
from codyra.yaml_loader import ConfigLoader, load_yaml, scalars


def load_config(source: str | Path | dict) -> dict:
    """Read (YAML file) or copy (dict) a config, fill defaults and validate it."""
    return validate_config(copy.deepcopy(source) if isinstance(source, dict) else read_config_file(source))


def _refuse_duplicate_keys(text: str) -> None:
    """PyYAML silently keeps the last of a key given twice in one mapping: name it instead.
    Composing builds the node tree only (no Python objects), so this reads as safely as safe_load."""
    todo = [yaml.compose(text, Loader=ConfigLoader)]
    while todo:
        node = todo.pop()
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {key.value!r} appears twice in one mapping (the second would silently win); keep one",
                        key.start_mark,
                    )
                seen.add(key.value)
                todo.append(value)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)


def read_config_file(source: str | Path, _chain: tuple[Path, ...] = ()) -> dict:
    """The YAML mapping in a config file, overlaid onto the file it ``extends`` (if any); one
    clear error for a missing, malformed or empty file and for a cycle of ``extends``."""
    path = Path(source)
    if not path.is_file():
        tried = path.absolute()
        if _chain:
            raise ConfigError(
                f"config file {_chain[-1]}: extends {path}, which does not exist (looked for {tried}); "
                f"fix the path (relative to {_chain[-1]})"
            )
        raise ConfigError(
            f"config file not found: {path} (looked for {tried}); pass the path of an existing file, "
            "e.g. --config config/config.yaml from the repository root"
        )
    if path.resolve() in _chain:
        cycle = " -> ".join(str(p) for p in (*_chain, path.resolve()))
        raise ConfigError(f"config files extend each other in a cycle: {cycle}; one of them must not extend")
    try:
        text = path.read_text()
        _refuse_duplicate_keys(text)
        cfg = load_yaml(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(err, "problem", None) or err
        raise ConfigError(f"config file {path} is not valid YAML{at}: {problem}; fix the file") from None
    if cfg is None:
        raise ConfigError(
            f"config file {path} is empty; it must hold the experiment's YAML mapping (see config/config.yaml)"
        )
    if not isinstance(cfg, dict):
        raise ConfigError(f"config file {path} must hold a YAML mapping at the top level, not a {type(cfg).__name__}")
    if "extends" not in cfg:
        return cfg
    base = cfg.pop("extends")
    if not isinstance(base, str) or not base:
        raise ConfigError(
            f"config file {path}: extends must be the path of a base config file (relative to this file), got {base!r}"
        )
    return overlay(read_config_file(path.parent / base, (*_chain, path.resolve())), cfg)


def overlay(base: dict, top: dict) -> dict:
    """``top`` over ``base``: mappings merge key by key (recursively), every other value replaces;
    null in place of a mapping removes it (the key takes its default: a variant drops a sweep block)."""
    out = copy.deepcopy(base)
    for key, value in top.items():
        if value is None and isinstance(out.get(key), dict):
            del out[key]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def config_from_files(paths: list, overrides: dict) -> dict:
    """Snakemake's config: its --configfile(s) in order (each with its ``extends`` resolved),
    then its --config values, merged as Snakemake merges them. Snakemake reads a --config value
    with YAML's base loader, which leaves every item of a list or mapping a string
    (``seeds=[0]`` -> ``['0']``): its strings are read here as a config file's scalars are."""
    cfg: dict = {}
    for path in paths:
        cfg = overlay(cfg, read_config_file(path))
    return overlay(cfg, scalars(dict(overrides)))


def parse_value(text: str):
    """A command-line value (``--set``) as YAML, read as a config file is (``1e-4`` is a float)."""
    return load_yaml(text)


def set_key(cfg: dict, key: str, value) -> None:
    """``cfg[a][b][c] = value`` for ``key = "a.b.c"`` (``--set``), creating missing mappings."""
    node = cfg
    *parents, leaf = key.split(".")
    for depth, part in enumerate(parents):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {'.'.join(parents[: depth + 1])} is not a mapping; set a key of a mapping")
    node[leaf] = value


def apply_sets(cfg: dict, items) -> dict:
    """``cfg`` with each ``KEY=VALUE`` of ``items`` (``--set``) set in place, the value read as YAML."""
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r} (e.g. --set train.lr=1e-4)")
        set_key(cfg, key, parse_value(value))
    return cfg
