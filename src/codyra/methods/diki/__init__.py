"""The diki method (its kind's entry point is ``METHOD``)."""

from codyra.methods.diki.method import METHOD

__all__ = ["METHOD"]
