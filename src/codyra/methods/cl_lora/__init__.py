"""The cl_lora method (its kind's entry point is ``METHOD``)."""

from codyra.methods.cl_lora.method import METHOD

__all__ = ["METHOD"]
