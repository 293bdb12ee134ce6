"""The sprompts method (its kind's entry point is ``METHOD``)."""

from codyra.methods.sprompts.method import METHOD

__all__ = ["METHOD"]
