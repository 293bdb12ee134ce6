"""CoDyRA-dagger: CoDyRA trained as usual, evaluated with domain prediction (the paper's
"dagger" rows: "uses domain prediction at inference similar to MoE-Adapters").

Our reading of the paper, where it gives no algorithm: the pretrained model's zero-shot
argmax over every task's classes predicts the domain (RAIL's predictor); an image predicted
to belong to a learned task k is classified by theta_k (rebuilt from the stored updates
1..k), every other image by theta_i. Transfer therefore equals plain CoDyRA's by
construction, as the paper states for its full-shot MTIL rows (69.1 both), while Average and
Last improve as far as the router is right. Training is CoDyRA's, unchanged; the per-task
updates it stores anyway are what inference keeps (``inference_extra_params``).
See ``codyra.clip.routed``.
"""

from __future__ import annotations

from codyra.methods.codyra import CoDyRA


class CoDyRADagger(CoDyRA):
    kind = "codyra_dagger"
    paper_row = "CoDyRA†"
    group = "complementation"
    predicts_domain = True

    def finish(self, model):
        update, summary = super().finish(model)
        # every task's update stays available at inference, to rebuild theta_k for images routed to task k
        return update, {**summary, "inference_extra_params": update.num_stored()}

    @classmethod
    def routed_cells(cls, cfg, method, seed, i, js, device):
        from codyra.clip.routed import routed_row

        return routed_row(cfg, method, seed, i, js, device)


METHOD = CoDyRADagger
