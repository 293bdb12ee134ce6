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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.ewc import previous_tensors
from codyra.methods.full import FullFineTune
from codyra.methods.options import MethodOptions, option

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
        raise ValueError(
            f"GEM memories of shape {tuple(memories.shape)} do not match a gradient of {g.numel()} entries"
        )
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


@dataclass(frozen=True)
class GEMOptions(MethodOptions):
    margin: float = option(0.5, minimum=0, doc="lower bound of the dual variables (TRACE/GEM margin 0.5)")
    eps: float = option(1e-3, minimum=0, doc="ridge on M M^T (TRACE/GEM eps 1e-3)")
    qp: str = option("quadprog", choices=QP_VARIANTS, doc="quadprog: GEM's dual; trace-qpth: TRACE's later qpth call")


class GEM(FullFineTune):
    """Memories live on the CPU and move to the device one parameter at a time, as TRACE's do."""

    kind = "gem"
    families = ("clip", "causal_lm")
    paper_row = "GEM"
    after_step_rewrites_parameters = False  # after_step counts steps
    Options = GEMOptions

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        stored = previous_tensors(ctx.previous_state, "memory.", self.params, self.kind)
        self.memories = stored or {}
        for n, m in self.memories.items():
            if m.ndim != 2 or m.shape[1] != self.params[n].numel() or len(m) != ctx.task_index - 1:
                raise ValueError(
                    f"stored GEM memory of {n} has shape {tuple(m.shape)}, "
                    f"expected ({ctx.task_index - 1}, {self.params[n].numel()})"
                )
        self.total, self.step, self.last = ctx.total_steps, 0, {}
        self.memory_dtype = torch.bfloat16  # TRACE's gradient buffer
        return groups

    def before_optimizer_step(self, ctx):
        o = self.options
        for n, p in self.params.items():
            if p.grad is None:
                continue
            if self.memories:
                p.grad.copy_(project_gradient(p.grad, self.memories[n], o.margin, o.eps, o.qp))
        if self.step + 1 == self.total:  # the memory: the task's last gradient, after its projection
            import torch

            self.last = {  # no gradient: a zero column, as TRACE's zero-filled buffer keeps
                n: (p.grad.detach().reshape(-1) if p.grad is not None else torch.zeros(p.numel())).to(
                    "cpu", self.memory_dtype
                )
                for n, p in self.params.items()
            }

    def after_step(self, step, total_steps):
        self.step = step

    def restore_checkpoint(self, state, step):
        self.step = step

    def state_to_store(self):
        import torch

        if not self.last:
            raise RuntimeError("GEM has no last-step gradient: the task ended before its last optimizer step")
        return {
            f"memory.{n}": torch.cat([self.memories[n], self.last[n][None]]) if self.memories else self.last[n][None]
            for n in self.params
        }

    @classmethod
    def footprint(cls, options, task_index):
        """Full fine-tuning's, with on the host the bf16 memories of the tasks before and the task's last
        gradient (2 i bytes), the i memories it stores (2 i), and on the device one parameter's memories in
        fp32 while its gradient is projected (the full fp32 gradient ``before_optimizer_step`` reads is the
        backend's)."""
        from dataclasses import replace

        full = super().footprint(options, task_index)
        memories = 2.0 * task_index
        return replace(
            full,
            host_bytes=full.host_bytes + memories,
            stored_bytes=full.stored_bytes + memories,
            largest_tensor_bytes=4.0 * (task_index - 1),
        )


METHOD = GEM
