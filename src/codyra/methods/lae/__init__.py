"""The lae method (its kind's entry point is ``METHOD``)."""

from codyra.methods.lae.method import METHOD

__all__ = ["METHOD"]
