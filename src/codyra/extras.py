"""The optional parts of the install: a command that needs one says which extra brings it.

``pip install codyra`` is the library (the models, the methods, training and evaluation, the
``codyra`` command). The extras add the rest: ``workflow`` (Snakemake and its SLURM plugin,
MLflow, submitit), ``llm`` (transformers, PEFT, DeepSpeed), ``docs`` and ``dev``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from codyra.errors import MissingExtraError


def require_extra(module: str, extra: str, purpose: str) -> ModuleType:
    """``module`` imported; if it is not installed, a MissingExtraError naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"{purpose} needs the package {module!r}, which is not installed: it comes with the {extra!r} extra, "
            f"pip install 'codyra[{extra}]' (make env installs it)"
        ) from err
