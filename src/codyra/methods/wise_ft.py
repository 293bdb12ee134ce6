"""WiSE-FT in the continual stream as ZSCL's MTIL code runs it (Thunderbeee/ZSCL,
mtil/scripts/WiSE_finetune.sh: ``--wise_merge --wise_ft_model n --wise_ft_alpha 0.8``):
fine-tune every parameter on task i, then interpolate with the model the task started from,

    theta_i = alpha * theta_ft + (1 - alpha) * theta_{i-1},     alpha = 0.8,

over every parameter (mtil/src/models/finetune.py, end of ``finetune``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune, FullOptions
from codyra.methods.options import option

if TYPE_CHECKING:
    import torch


def interpolate(previous: torch.Tensor, finetuned: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * finetuned + (1 - alpha) * previous (ZSCL's ``wise_ft_alpha`` weights the fine-tuned model)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"WiSE-FT alpha must lie in [0, 1] (1 = keep the fine-tuned model), got {alpha}")
    return alpha * finetuned + (1.0 - alpha) * previous


@dataclass(frozen=True)
class WiSEFTOptions(FullOptions):
    alpha: float = option(0.8, minimum=0, maximum=1, doc="weight of the fine-tuned model (ZSCL --wise_ft_alpha)")


class WiSEFT(FullFineTune):
    kind = "wise_ft"
    families = ("clip", "causal_lm")
    paper_row = "WiSE-FT"
    Options = WiSEFTOptions

    def finish(self, model):
        import torch

        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(interpolate(self.before[name].to(p.device, p.dtype), p, self.options.alpha))
        return super().finish(model)


METHOD = WiSEFT
