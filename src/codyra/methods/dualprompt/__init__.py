"""The dualprompt method (its kind's entry point is ``METHOD``)."""

from codyra.methods.dualprompt.method import METHOD

__all__ = ["METHOD"]
