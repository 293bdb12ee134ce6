"""GEM as TRACE implements it (BeyonderXX/TRACE, model/Regular/GEM.py; full-parameter
training, scripts/train_seq_cl.sh), in every model family.

- Memory: one gradient per finished task, per trainable parameter: the gradient of the
  task's last optimizer step, taken after its own projection, stored in bf16 (TRACE's
  ``store_grads`` at ``step == len(dataloader) - 1``, a bf16 buffer).
- From the second task on, after every backward and before the optimizer step, each
  parameter's gradient g is projected on its own (one QP per parameter tensor, not one for the
  whole model) against that parameter's memories M (k x n, one row per earlier task) when some
  g . m_k < 0: solve the GEM dual

      min_v 1/2 v^T (M M^T + eps I) v + (M g)^T v   s.t.  v >= margin        (margin 0.5, eps 1e-3)

  and use g + M^T v (``project2cone2``; GEM's own code and TRACE's first version, with quadprog).
- ``qp: trace-qpth`` reproduces TRACE's later port to qpth, which passes the same P, the linear
  term -M g and the constraint I v <= margin to a solver of min 1/2 v^T P v + q^T v s.t. G v <= h:
  with u = -v that is the dual above with v >= -margin, and the result g - M^T u.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

QP_VARIANTS = ("quadprog", "trace-qpth")


def gem_dual(P: torch.Tensor, Mg: torch.Tensor, lower: float) -> torch.Tensor:
    """argmin_v 1/2 v^T P v + Mg^T v subject to v >= lower, P symmetric positive definite.

    With w = v - lower >= 0 and P = L L^T this is the non-negative least-squares problem
    min ||L^T w + L^-1 (Mg + P lower)||, solved exactly (Lawson-Hanson) in float64.
    """
    import numpy as np
    import torch
    from scipy.optimize import nnls

    P64, c = P.detach().double().cpu(), Mg.detach().double().cpu()
    lower_vec = torch.full_like(c, lower)
    d = c + P64 @ lower_vec
    L = torch.linalg.cholesky(P64)
    b = -torch.linalg.solve_triangular(L, d[:, None], upper=False)[:, 0]
    w, _ = nnls(L.T.numpy(), b.numpy())
    return torch.from_numpy(np.asarray(w)) + lower_vec


def project_gradient(
    gradient: torch.Tensor, memories: torch.Tensor, margin: float = 0.5, eps: float = 1e-3, qp: str = "quadprog"
) -> torch.Tensor:
    """GEM's projection of one parameter's gradient against its memories (k x numel).

    Returns ``gradient`` itself when no memory conflicts with it (every g . m_k >= 0), else the
    projected gradient with the gradient's shape and dtype.
    """
    if qp not in QP_VARIANTS:
        raise ValueError(f"unknown GEM qp {qp!r}; choose one of {', '.join(QP_VARIANTS)}")
    g = gradient.reshape(-1).float()
    M = memories.to(device=g.device, dtype=g.dtype)
    if M.ndim != 2 or M.shape[1] != g.numel():
        raise ValueError(f"GEM memories of shape {tuple(memories.shape)} do not match a gradient of {g.numel()} entries")
    Mg = M @ g
    if not (Mg < 0).any():
        return gradient
    import torch

    P = M @ M.T
    P = 0.5 * (P + P.T) + eps * torch.eye(len(M), dtype=P.dtype, device=P.device)
    if qp == "quadprog":
        v = gem_dual(P, Mg, margin).to(g)
        x = g + v @ M
    else:
        u = gem_dual(P, Mg, -margin).to(g)
        x = g - u @ M
    return x.reshape(gradient.shape).to(gradient.dtype)
