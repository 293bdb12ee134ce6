"""CoDyRA-dagger: CoDyRA trained as usual, evaluated with domain prediction (the paper's
"dagger" rows).

What the paper supports: only the X-TAIL table caption's "uses domain prediction at inference
similar to [MoE-Adapters]" and the full-shot MTIL note that its Transfer equals plain CoDyRA's
"by construction" (69.1 both). It gives no algorithm: not which predictor, nor what a
predicted domain selects. The official release (Artificer-AI-Lab/CoDyRA) has no domain
prediction: ``main.py`` ``evaluation`` classifies every test image with the merged model over
every dataset's classes.

Our reading (``router: zero_shot``): the pretrained model's zero-shot argmax over every task's
classes predicts each image's domain (RAIL's predictor, with RAIL's prompt ``a photo of a {}.``,
option ``router_prompts``); an image predicted to belong to a learned task k is classified by
theta_k (rebuilt from the stored updates 1..k), every other image by theta_i. The other reading
of "similar to MoE-Adapters", ``router: ddas``: MoE-Adapters' selector (its options as
``codyra.methods.moe_adapters.method``), one autoencoder per task trained on theta_0's image features
of the task's training images, routes each test batch as a whole to theta_k, or to theta_i
above its threshold. Either way Transfer equals plain CoDyRA's, as the paper states. Training
is CoDyRA's, unchanged (the autoencoders draw from their own generator); the per-task updates
it stores anyway are what inference keeps (``inference_extra_params``, plus the autoencoders).
See ``codyra.methods.codyra_dagger.clip``.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.codyra import CoDyRA, CoDyRAOptions
from codyra.methods.moe_adapters.method import DDASOptions
from codyra.methods.options import option

DDAS_STREAM = 0xDA5  # seed part of the autoencoders' initialisation, apart from CoDyRA's generator


@dataclass(frozen=True)
class CoDyRADaggerOptions(CoDyRAOptions, DDASOptions):
    router: str = option(
        "zero_shot",
        choices=("zero_shot", "ddas"),
        doc="zero_shot: theta_0's zero-shot argmax per image (RAIL's predictor); "
        "ddas: MoE-Adapters' autoencoders per test batch",
    )
    router_prompts: str = option(
        "rail",
        choices=("rail", "dataset"),
        doc="the zero-shot router's prompts: rail = 'a photo of a {}.' for every class (RAIL's predictor); "
        "dataset = each dataset's templates",
    )


class CoDyRADagger(CoDyRA):
    kind = "codyra_dagger"
    families = ("clip", "blip")
    paper_row = "CoDyRA†"
    group = "complementation"
    predicts_domain = True
    Options = CoDyRADaggerOptions

    def setup(self, ctx):
        self.state, self.router_params = {}, 0
        if self.options.router == "ddas":
            self.state = self._fit_router(ctx)
        return super().setup(ctx)

    def _fit_router(self, ctx) -> dict:
        """Tasks 1..i's autoencoders and thresholds: task i's trained on theta_0's features."""
        import torch

        from codyra.methods.moe_adapters.clip import ddas_state, load_ddas
        from codyra.methods.moe_adapters.method import fit_selector
        from codyra.steps.batches import derive_seed

        autoencoders, thresholds = load_ddas(ctx.previous_state) if ctx.previous_state else ([], torch.zeros(0))
        if len(autoencoders) != ctx.task_index - 1:
            raise ValueError(
                f"CoDyRA-dagger's state of task {ctx.task_index - 1} holds {len(autoencoders)} autoencoders: "
                "retrain it with router: ddas"
            )
        theta_0 = ctx.theta_0().to(ctx.device).requires_grad_(False)
        generator = torch.Generator().manual_seed(derive_seed(ctx.seed, ctx.task_index, DDAS_STREAM))
        ae, threshold = fit_selector(ctx, self.options, theta_0, generator)
        self.router_params = sum(p.numel() for p in ae.parameters())
        return ddas_state([*autoencoders, ae], [*thresholds.tolist(), threshold])

    def finish(self, model):
        update, summary = super().finish(model)
        # every task's update stays available at inference, to rebuild theta_k for images routed to task k
        # (router: ddas, and this task's autoencoder)
        return update, {**summary, "inference_extra_params": update.num_stored() + self.router_params}

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.codyra_dagger.clip import routed_row

        c = row.row
        state = row.stored_state() if row.options.router == "ddas" else None
        return routed_row(row.cfg, c.method, c.seed, c.i, list(c.js), row.device, row.options, row.pretrained, state)


METHOD = CoDyRADagger
