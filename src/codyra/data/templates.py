"""Prompt templates per dataset; `{}` is the class-name placeholder.

Each dataset's record (:mod:`codyra.data.datasets`) holds its templates per protocol. MTIL uses
CLIP's prompt ensembles (evaluation averages them, training uses the first); X-TAIL uses CoOp's
single template per dataset. RAIL itself does not: its zero-shot classifier (the fused logits and
the domain predictor) embeds every class of every dataset with the one template ``RAIL_TEMPLATE``
(linghan1997/Regression-based-Analytic-Incremental-Learning ``primal_RAIL.py`` line 234,
``dual_RAIL.py`` line 60), as the X-TAIL paper says.
"""

from __future__ import annotations

from codyra.data.catalog import RECORDS, check_name
from codyra.data.datasets import OPENAI_IMAGENET_TEMPLATES

RAIL_TEMPLATE = "a photo of a {}."


def templates(name: str, protocol: str) -> tuple[str, ...]:
    check_name(name, protocol)
    found = RECORDS[name].templates[protocol]
    if found == OPENAI_IMAGENET_TEMPLATES:  # imported only here: open_clip pulls in torch
        from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES as OPENAI_TEMPLATES

        return tuple(template("{}") for template in OPENAI_TEMPLATES)
    return found
