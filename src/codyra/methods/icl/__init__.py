"""The icl method (its kind's entry point is ``METHOD``)."""

from codyra.methods.icl.method import METHOD

__all__ = ["METHOD"]
