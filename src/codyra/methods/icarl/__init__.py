"""The icarl method (its kind's entry point is ``METHOD``)."""

from codyra.methods.icarl.method import METHOD

__all__ = ["METHOD"]
