"""Rows of a method that predicts each test sample's domain (``Method.predicts_domain``: RAIL,
MoE-Adapters, CoDyRA-dagger): the method's own task-agnostic inference computes the cells of
theta_i, given a :class:`~codyra.methods.base.RowContext` built here, in place of the family's
cells of one merged model.
"""

from __future__ import annotations

from codyra.device import pick_device, use_threads
from codyra.family import family_of
from codyra.methods.base import Row, RowContext
from codyra.store.paths import task_dir
from codyra.store.updates import stored_state


def routed_cells(cfg: dict, row: Row, device):
    """Yield the cells A[i, j] (with their ``routing``) of ``row``, by its method's inference."""
    use_threads(cfg["eval"]["threads"])

    def row_state():
        state = stored_state(cfg, row.method, row.seed, row.i)
        if state is None:
            raise FileNotFoundError(
                f"{task_dir(cfg, row.method, row.seed, row.i)} holds no {row.kind.kind} state: rerun its training job"
            )
        return state

    context = RowContext(
        cfg=cfg,
        row=row,
        device=pick_device(device),
        stored_state=row_state,
        rebuild=lambda: family_of(cfg).rebuild(cfg, row.method, row.seed, row.i),
        pretrained=lambda: family_of(cfg).pretrained(cfg),
    )
    yield from row.kind.routed_cells(context)
