"""The rail method (its kind's entry point is ``METHOD``)."""

from codyra.methods.rail.method import METHOD

__all__ = ["METHOD"]
