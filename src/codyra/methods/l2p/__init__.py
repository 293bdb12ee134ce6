"""The l2p method (its kind's entry point is ``METHOD``)."""

from codyra.methods.l2p.method import METHOD

__all__ = ["METHOD"]
