"""OGD as TRACE implements it (BeyonderXX/TRACE, model/Regular/OGD.py, training/main.py): one
LoRA adapter (r 8, alpha 32, dropout 0.1, PEFT's default q/v targets) trained through the whole
stream as SeqLoRA, with its gradients kept orthogonal to a basis of earlier tasks' gradients.

- Basis: after each task, the gradients (over all LoRA parameters, flattened) of every
  optimizer step of the task's last epoch, taken after projection (TRACE appends at every step
  of the last epoch), are appended and the basis is orthonormalised by classical Gram-Schmidt
  (TRACE's ``orthonormalize``; re-running it over the old, already orthonormal columns changes
  nothing, so only the new columns are processed here).
- Projection, from the second task on, per LoRA parameter: g_p <- g_p - B_p (B_p^T g_p) with
  B_p the rows of the basis that belong to parameter p (TRACE's gradient hook ``project_vec``
  slices the global basis per parameter). ``projection: global`` projects the concatenated
  gradient instead, g <- g - B (B^T g), as the OGD paper does.

Differences from TRACE's code, on purpose: TRACE appends the same gradient buffer at every
step (``self.new_basis.append(self.cur_grads)`` without a copy), so its basis holds the last
step's gradient repeated, which Gram-Schmidt turns into that gradient plus rounding residue; we
append a copy per step. A new gradient that lies in the span of the basis (relative residual
below ``tol``) adds no direction and is dropped, where TRACE would divide by ~0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PROJECTIONS = ("per_parameter", "global")


def extend_basis(basis: torch.Tensor, vectors: torch.Tensor, tol: float = 1e-6) -> torch.Tensor:
    """Orthonormal columns spanning ``basis`` (n x k, orthonormal) and the columns of ``vectors``
    (n x m), in order, by classical Gram-Schmidt: v <- (v - V V^T v) / ||v - V V^T v||."""
    import torch

    if basis.shape[0] != vectors.shape[0]:
        raise ValueError(f"OGD basis rows {basis.shape[0]} != gradient length {vectors.shape[0]}")
    columns = list(basis.T)
    for v in vectors.T.to(basis.dtype):
        if columns:
            V = torch.stack(columns, dim=1)
            residual = v - V @ (V.T @ v)
        else:
            residual = v
        norm = residual.norm()
        if norm > tol * v.norm():
            columns.append(residual / norm)
    return torch.stack(columns, dim=1) if columns else basis.new_zeros((basis.shape[0], 0))


def project_out(gradient: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """gradient - B (B^T gradient) for a flat gradient and basis rows B of the same entries."""
    if basis.shape[1] == 0:
        return gradient
    return gradient - basis @ (basis.T @ gradient)


def project_parameters(grads: list[torch.Tensor], basis: torch.Tensor, projection: str = "per_parameter") -> list:
    """Project the gradients of the adapter's parameters (in basis row order) against the basis."""
    import torch

    if projection not in PROJECTIONS:
        raise ValueError(f"unknown OGD projection {projection!r}; choose one of {', '.join(PROJECTIONS)}")
    sizes = [g.numel() for g in grads]
    if sum(sizes) != basis.shape[0]:
        raise ValueError(f"OGD basis has {basis.shape[0]} rows, the adapter {sum(sizes)} parameters: other placement or rank?")
    flat = [g.reshape(-1).to(basis.dtype) for g in grads]
    if projection == "global":
        out = project_out(torch.cat(flat), basis).split(sizes)
    else:
        out = [project_out(g, B) for g, B in zip(flat, basis.split(sizes), strict=True)]
    return [o.reshape(g.shape).to(g.dtype) for o, g in zip(out, grads, strict=True)]
