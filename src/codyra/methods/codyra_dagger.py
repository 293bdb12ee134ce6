"""CoDyRA-dagger: CoDyRA trained as usual, evaluated with domain prediction (the paper's
"dagger" rows).

What the paper supports: only the X-TAIL table caption's "uses domain prediction at inference
similar to [MoE-Adapters]" and the full-shot MTIL note that its Transfer equals plain CoDyRA's
"by construction" (69.1 both). It gives no algorithm: not which predictor, nor what a
predicted domain selects. The official release (Artificer-AI-Lab/CoDyRA) has no domain
prediction: ``main.py`` ``evaluation`` classifies every test image with the merged model over
every dataset's classes.

Our reading: the pretrained model's zero-shot argmax over every task's classes predicts each
image's domain (RAIL's predictor, with RAIL's prompt ``a photo of a {}.``, option
``router_prompts``); an image predicted to belong to a learned task k is classified by theta_k
(rebuilt from the stored updates 1..k), every other image by theta_i. This keeps Transfer
equal to plain CoDyRA's, as the paper states. The other plausible reading, MoE-Adapters'
batch-wise DDAS autoencoders choosing theta_k, is not implemented: its per-batch routing
and hand-set threshold are MoE-Adapters' own (``codyra.methods.moe_adapters``). Training is
CoDyRA's, unchanged; the per-task updates it stores anyway are what inference keeps
(``inference_extra_params``). See ``codyra.clip.routed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.codyra import CoDyRA, CoDyRAOptions
from codyra.methods.options import option


@dataclass(frozen=True)
class CoDyRADaggerOptions(CoDyRAOptions):
    router_prompts: str = option(
        "rail", choices=("rail", "dataset"),
        doc="the zero-shot domain predictor's prompts: rail = 'a photo of a {}.' for every class (RAIL's predictor); "
        "dataset = each dataset's templates",
    )


class CoDyRADagger(CoDyRA):
    kind = "codyra_dagger"
    group = "complementation"
    predicts_domain = True
    Options = CoDyRADaggerOptions

    def finish(self, model):
        update, summary = super().finish(model)
        # every task's update stays available at inference, to rebuild theta_k for images routed to task k
        return update, {**summary, "inference_extra_params": update.num_stored()}

    @classmethod
    def routed_cells(cls, cfg, method, seed, i, js, device):
        from codyra.clip.routed import routed_row

        options = cls(cfg["method_configs"][method]).options
        return routed_row(cfg, method, seed, i, js, device, router_prompts=options.router_prompts)


METHOD = CoDyRADagger
