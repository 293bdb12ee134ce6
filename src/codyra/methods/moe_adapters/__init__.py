"""The moe_adapters method (its kind's entry point is ``METHOD``)."""

from codyra.methods.moe_adapters.method import METHOD

__all__ = ["METHOD"]
