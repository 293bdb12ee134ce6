"""The codyra_dagger method (its kind's entry point is ``METHOD``)."""

from codyra.methods.codyra_dagger.method import METHOD

__all__ = ["METHOD"]
