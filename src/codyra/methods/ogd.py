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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.lora import LoRAOptions
from codyra.methods.options import option
from codyra.methods.seqlora import SeqLoRA

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
        raise ValueError(
            f"OGD basis has {basis.shape[0]} rows, the adapter {sum(sizes)} parameters: other placement or rank?"
        )
    flat = [g.reshape(-1).to(basis.dtype) for g in grads]
    if projection == "global":
        out = project_out(torch.cat(flat), basis).split(sizes)
    else:
        out = [project_out(g, B) for g, B in zip(flat, basis.split(sizes), strict=True)]
    return [o.reshape(g.shape).to(g.dtype) for o, g in zip(out, grads, strict=True)]


@dataclass(frozen=True)
class OGDOptions(LoRAOptions):
    projection: str = option(
        "per_parameter", choices=PROJECTIONS, doc="per_parameter: TRACE's hook; global: the OGD paper"
    )
    max_memories: int | None = option(
        None, minimum=1, doc="keep the last this many gradients of a task (null: all of its last epoch, TRACE)"
    )


class OGD(SeqLoRA):
    kind = "ogd"
    families = ("clip", "causal_lm")
    paper_row = "OGD"
    after_step_rewrites_parameters = False  # after_step counts steps
    Options = OGDOptions

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        self.lora = [p for t in self.targets for p in (self.adapters[t.name].A, self.adapters[t.name].B)]
        rows = sum(p.numel() for p in self.lora)
        state = ctx.previous_state
        if ctx.task_index > 1 and (state is None or "basis" not in state):
            raise ValueError("the previous task stored no OGD basis: retrain it with method kind ogd")
        self.basis = (
            state["basis"].to(ctx.device, torch.float32)
            if ctx.task_index > 1
            else torch.zeros(rows, 0, device=ctx.device)
        )
        if self.basis.shape[0] != rows:
            raise ValueError(
                f"stored OGD basis has {self.basis.shape[0]} rows, this adapter {rows} parameters: "
                "other placement or rank?"
            )
        # TRACE appends the gradients of every step of the task's last epoch
        self.collect_after = max(0, ctx.total_steps - ctx.steps_per_epoch)
        self.step, self.collected = 0, []
        return groups

    def before_optimizer_step(self, ctx):
        import torch

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.lora]
        if self.basis.shape[1]:
            grads = project_parameters(grads, self.basis, self.options.projection)
            for p, g in zip(self.lora, grads, strict=True):
                if p.grad is not None:
                    p.grad.copy_(g)
        if self.step + 1 > self.collect_after:
            flat = torch.cat([g.detach().reshape(-1).float() for g in grads])
            self.collected.append(torch.nan_to_num(flat, nan=0.0))

    def after_step(self, step, total_steps):
        self.step = step

    def checkpoint_state(self):
        import torch

        return {"collected": torch.stack(self.collected).cpu()} if self.collected else {}

    def restore_checkpoint(self, state, step):
        self.step = step
        self.collected = list(state["collected"].to(self.basis.device)) if "collected" in state else []

    def finish(self, model):
        import torch

        kept = self.collected[-self.options.max_memories :] if self.options.max_memories else self.collected
        if kept:
            self.basis = extend_basis(self.basis, torch.stack(kept, dim=1))
        self.collected = []
        return super().finish(model)

    def state_to_store(self):
        return {"basis": self.basis.detach().cpu().contiguous()}


METHOD = OGD
