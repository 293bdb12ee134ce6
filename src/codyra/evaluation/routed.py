"""Rows of a method that predicts each test sample's domain (``Method.predicts_domain``: RAIL,
MoE-Adapters, CoDyRA-dagger): the method's own task-agnostic inference computes the cells of
theta_i, given a :class:`~codyra.methods.base.RowContext` built here, in place of the family's
cells of one merged model.
"""

from __future__ import annotations

from codyra.device import pick_device, use_threads
from codyra.family import family_of
from codyra.methods.base import CellPosition, Method, RowContext
from codyra.store.paths import task_dir
from codyra.store.updates import stored_state


def routed_cells(cfg: dict, kind: type[Method], cell: CellPosition, device):
    """Yield the cells A[i, j] (with their ``routing``) of ``cell``'s row, by ``kind``'s inference."""
    use_threads(cfg["eval"]["threads"])

    def row_state():
        state = stored_state(cfg, cell.method, cell.seed, cell.task)
        if state is None:
            raise FileNotFoundError(
                f"{task_dir(cfg, cell.method, cell.seed, cell.task)} holds no {kind.kind} state: rerun its training job"
            )
        return state

    row = RowContext(
        cfg=cfg,
        cell=cell,
        device=pick_device(device),
        options=kind(cfg["method_configs"][cell.method]).options,
        stored_state=row_state,
        rebuild=lambda: family_of(cfg).rebuild(cfg, cell.method, cell.seed, cell.task),
        pretrained=lambda: family_of(cfg).pretrained(cfg),
    )
    yield from kind.routed_cells(row)
