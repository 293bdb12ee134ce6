"""CoDyRA + RAIL (the paper's appendix table "integrating aggregation-based adapters", X-TAIL):
CoDyRA continually updates the backbone, and RAIL's analytic regression head with its zero-shot
domain fusion sits on top of the updated representation instead of the frozen one.

What the paper supports: the appendix says the representation CoDyRA updates is paired with
RAIL's "aggregation-based adapters" as an "additional adaptive prediction head", and reports
Transfer 63.1 for both variants; it gives no algorithm. The official release
(Artificer-AI-Lab/CoDyRA) holds no RAIL code (``main.py`` evaluates the merged model alone).

Our reading: task i trains and merges as CoDyRA; then
RAIL absorbs task i (its recursion from task i-1's state, ``codyra.methods.rail.clip.fit``) on the
image features of theta_i, the backbone right after task i. A cell A[i, j] fuses theta_i's
zero-shot logits with the regression head after task i, both on theta_i's features, exactly as
RAIL fuses them on theta_0's. An unseen task keeps theta_i's zero-shot prediction under RAIL's
head, whose prompt is RAIL's ``a photo of a {}.`` (option ``prompts: rail``); with ``prompts:
dataset`` (the benchmark's templates) Transfer is exactly plain CoDyRA's. The paper's 63.1 is
close to, not equal to, CoDyRA's X-TAIL Transfer (63.2), so it does not settle which head the
authors used. The head's other options are RAIL's (``codyra.methods.rail.method``).

What this reading fixes that the paper leaves open: the head absorbs task k on theta_k's
features and is never refitted, so after task i RAIL-Primal's regression holds tasks 1..i-1 as
seen through older backbones, and RAIL-Dual's memory holds those older backbones' features,
while its queries (the test features) are theta_i's. Refitting on theta_i's features of every
earlier task would need their images, which neither RAIL nor CoDyRA keeps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from codyra.methods.codyra import CoDyRA, CoDyRAOptions
from codyra.methods.rail.method import RAILOptions


@dataclass(frozen=True)
class CoDyRARAILOptions(CoDyRAOptions, RAILOptions):
    """CoDyRA's options and RAIL's."""


class CoDyRARAIL(CoDyRA):
    kind = "codyra_rail"
    families = ("clip",)
    paper_row = "CoDyRA + RAIL-{variant:title}"
    group = "complementation"
    predicts_domain = True
    Options = CoDyRARAILOptions

    def setup(self, ctx):
        self.seed, self.previous = ctx.seed, ctx.previous_state
        self.feature_pass = functools.partial(ctx.family.feature_pass, ctx.cfg, ctx.seed, ctx.task_index, ctx.train)
        return super().setup(ctx)

    def finish(self, model):
        from codyra.methods.rail.clip import extra_params, fit

        update, summary = super().finish(model)  # model is theta_i now
        batches, classes = self.feature_pass(next(model.parameters()).device, model=model)
        self.state = fit(self.options, self.previous, batches, classes, self.seed)
        params, memory = extra_params(self.options, self.state, batches[0][0].shape[1])
        return update, {**summary, "inference_extra_params": params, "inference_memory": memory}

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.rail.clip import rail_row

        c = row.row
        state = row.stored_state()
        return rail_row(row.cfg, c.method, row.options, c.seed, c.i, list(c.js), row.device, state, row.rebuild())


METHOD = CoDyRARAIL
