"""YAML as people write numbers: the one loader of every config the platform reads.

PyYAML implements YAML 1.1, where a float needs a dot (``1.0e-3``): ``lr: 1e-3`` reads as the
string ``'1e-3'`` and fails validation. :class:`ConfigLoader` is PyYAML's safe loader plus the
float form of YAML 1.2's core schema, so ``1e-3``, ``5e-5`` and ``1E+2`` are floats; everything
else reads as ``yaml.safe_load`` reads it.
"""

from __future__ import annotations

import re
from typing import ClassVar

import yaml

# YAML 1.2 core schema floats with an exponent and no dot (the dotted forms are floats in YAML 1.1 already).
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$")
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float"))


class ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads ``1e-3``-style numbers as floats."""

    # a copy: add_implicit_resolver would otherwise change SafeLoader's own table
    yaml_implicit_resolvers: ClassVar[dict] = {
        key: list(value) for key, value in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))


def load_yaml(stream):
    """The document in ``stream`` (a string or an open file), read with :class:`ConfigLoader`."""
    loader = ConfigLoader(stream)  # a SafeLoader (plain data only), as yaml.safe_load builds one
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def scalar(text: str):
    """``text`` as the plain scalar it would be in a config file: null, a bool, an int or a float
    (``'1e-3'`` -> 0.001, ``'0'`` -> 0, ``'true'`` -> True); any other text stays the string."""
    tag = ConfigLoader("").resolve(yaml.ScalarNode, text, (True, False))
    return load_yaml(text) if tag in _SCALAR_TAGS else text


def scalars(value):
    """``value`` with every string leaf read by :func:`scalar`, mappings and lists kept: the values
    Snakemake hands over from ``--config`` (its YAML base loader leaves every leaf a string)."""
    if isinstance(value, dict):
        return {key: scalars(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scalars(item) for item in value]
    return scalar(value) if isinstance(value, str) else value
