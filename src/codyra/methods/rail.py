"""RAIL-Primal / RAIL-Dual (Xu et al., the X-TAIL reference): closed-form regression adapters on
the frozen pretrained image features, fused with zero-shot CLIP by zero-shot domain prediction.

The backbone never changes (the stored update is empty); each task's method state holds the
regression so far: Primal the inverse autocorrelation R and weights W over the expanded
features, Dual the features and labels of every sample seen (its "memory"). The math is in
``codyra.complement.rail``; the CLIP side (one pass of frozen features per task, fused
evaluation) in ``codyra.clip.analytic``. Defaults: ``configs/analytic_clip.yaml`` of
linghan1997/Regression-based-Analytic-Incremental-Learning.
"""

from __future__ import annotations

from typing import ClassVar

from codyra.methods.base import Method

VARIANTS = ("primal", "dual")


class RAIL(Method):
    kind = "rail"
    group = "complementation"
    predicts_domain = True
    defaults: ClassVar[dict] = {
        "variant": "primal",
        "hidden_dim": 15000,  # RAIL-Primal's random ReLU expansion width (0: none)
        "gamma": 0.1,  # RAIL-Primal ridge regularisation ("regularization")
        "kernel_gamma": 0.1,  # RAIL-Dual's Gaussian kernel width ("gamma")
        "kernel_lambda": 0.001,  # RAIL-Dual's ridge term (dual_RAIL.py: lamda=0.001)
        "fusion_weight": 0.9,  # weight of the adapter in the fusion
        "precision": "float32",  # RAIL's working precision (float64: exact to rounding for tests)
    }

    def __init__(self, spec):
        super().__init__(spec)
        o = self.options
        if o["variant"] not in VARIANTS:
            raise ValueError(f"rail option variant must be one of {VARIANTS}, got {o['variant']!r}")
        if o["precision"] not in ("float32", "float64"):
            raise ValueError(f"rail option precision must be float32 or float64, got {o['precision']!r}")
        if not 0 <= o["fusion_weight"] <= 1:
            raise ValueError(f"rail option fusion_weight must be in [0, 1], got {o['fusion_weight']}")
        if o["hidden_dim"] < 0:
            raise ValueError(f"rail option hidden_dim must be >= 0, got {o['hidden_dim']}")
