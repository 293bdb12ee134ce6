"""RAIL-Primal / RAIL-Dual (Xu et al., the X-TAIL reference): closed-form regression adapters on
the frozen pretrained image features, fused with zero-shot CLIP by zero-shot domain prediction.

The backbone never changes (the stored update is empty); each task's method state holds the
regression so far: Primal the inverse autocorrelation R and weights W over the expanded
features, Dual the features and labels of every sample seen (its "memory"). The math is in
``codyra.methods.rail.regression``; the CLIP side (one pass of frozen features per task, fused
evaluation) in ``codyra.methods.rail.clip``. Defaults: ``configs/analytic_clip.yaml`` of
linghan1997/Regression-based-Analytic-Incremental-Learning; its zero-shot head (fused logits and
domain prediction) embeds every class with ``a photo of a {}.`` (option ``prompts: rail``).
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class RAILOptions(MethodOptions):
    variant: str = option("primal", choices=("primal", "dual"))
    hidden_dim: int = option(15000, minimum=0, doc="RAIL-Primal's random ReLU expansion width (0: none)")
    gamma: float = option(0.1, exclusive_minimum=0, doc="RAIL-Primal ridge regularisation (RAIL: regularization)")
    kernel_gamma: float = option(0.1, exclusive_minimum=0, doc="RAIL-Dual Gaussian kernel width (RAIL: gamma)")
    kernel_lambda: float = option(0.001, exclusive_minimum=0, doc="RAIL-Dual ridge term (dual_RAIL.py: lamda)")
    fusion_weight: float = option(
        0.8,
        minimum=0,
        maximum=1,
        doc="weight of the adapter in the zero-shot fusion (RAIL configs/analytic_clip.yaml: 0.8)",
    )
    precision: str = option("float32", choices=("float32", "float64"), doc="working precision (RAIL: float32)")
    prompts: str = option(
        "rail",
        choices=("rail", "dataset"),
        doc="zero-shot head and domain predictor: rail = 'a photo of a {}.' for every class "
        "(RAIL primal_RAIL.py l.234, dual_RAIL.py l.60); dataset = each dataset's templates (the benchmark's)",
    )


class RAIL(Method):
    kind = "rail"
    families = ("clip", "blip")
    paper_row = "RAIL-{variant:title}†"
    group = "complementation"
    predicts_domain = True
    closed_form = True
    Options = RAILOptions

    def setup(self, ctx):
        return []  # nothing trains by gradient

    def absorb(self, previous_state, batches, num_classes: int, seed: int) -> None:
        from codyra.methods.rail.clip import fit

        self.state = fit(self.options, previous_state, batches, num_classes, seed)
        self.feature_dim = batches[0][0].shape[1]

    def finish(self, model):
        from codyra.methods.rail.clip import extra_params
        from codyra.store.updates import TaskUpdate

        params, memory = extra_params(self.options, self.state, self.feature_dim)
        summary = {
            "trainable_params": 0,
            "stored_params": 0,
            "inference_extra_params": params,
            "inference_memory": memory,
        }
        return TaskUpdate("none"), summary

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.rail.clip import rail_row

        c = row.row
        state = row.stored_state()
        return rail_row(row.cfg, c.method, row.options, c.seed, c.i, list(c.js), row.device, state, row.pretrained())


METHOD = RAIL
