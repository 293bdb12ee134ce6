"""What every method kind declares, checked the same way for the built-in kinds, the worked example
of docs/adding-a-method.md and the plugin package examples/codyra-mylora."""

from __future__ import annotations

from codyra.methods.base import Method
from codyra.methods.options import MethodOptions, parse_options

FAMILIES = {"clip", "causal_lm", "blip"}  # the model.family values codyra.family.family_of knows


def contract_problems(cls: type[Method]) -> list[str]:
    """Each declaration the kind ``cls`` lacks or gets wrong (none: it keeps the contract)."""
    kind, problems = cls.kind, []
    if "families" not in vars(cls):
        problems.append(f"{kind} must declare families in its own class body")
    elif not cls.families or not set(cls.families) <= FAMILIES:
        problems.append(f"{kind}: families {cls.families!r} must name some of {sorted(FAMILIES)}")
    if "paper_row" not in vars(cls):
        problems.append(f"{kind} must declare paper_row (its row in the paper's tables, or None)")
    elif not (cls.paper_row is None or isinstance(cls.paper_row, str)):
        problems.append(f"{kind}: paper_row must be a str or None, got {cls.paper_row!r}")
    if not issubclass(cls.Options, MethodOptions):
        problems.append(f"{kind}: Options must subclass MethodOptions")
    elif parse_options(cls.Options, {"kind": kind}, kind=kind) != cls.Options():
        problems.append(f"{kind}: every option must have a default")
    else:
        cls({"kind": kind})  # builds from its kind alone
    return problems
