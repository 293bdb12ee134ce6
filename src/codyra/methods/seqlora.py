"""SeqLoRA as TRACE and TreeLoRA run it: one LoRA adapter trained straight through the task
stream, never merged and never re-initialised between tasks (TRACE ``training/main.py`` wraps
the model with peft once and ``model/lora.py`` only saves the adapter after each task;
TreeLoRA ``model/lora.py`` likewise).

Every task job still stores its own update, so theta_i = theta_0 + updates 1..i is rebuilt
as for any other method. With D_i = scale * B_i A_i the adapter's product after task i,
update i holds D_i - D_{i-1} as rank-2r factors: A = [A_i; A_{i-1}], B = [B_i, B_{i-1}],
gates [+scale] * r + [-scale] * r (task 1: D_1 alone). Task i reads the first r components of
update i-1 back as its starting adapter and subtracts D_{i-1} from the frozen weights, so the
base it trains on is theta_0 (up to fp32 rounding) and the adapter carries all of D_{i-1}.
The summary's ``dW_fro`` is the norm of the task's increment D_i - D_{i-1}.
:class:`CarriedAdapter` is that mechanism; TreeLoRA and HiDe-LoRA use it too (their
``adapter: stream``).

Each task job starts a fresh AdamW state unless ``train.carry_optimizer`` is set (TRACE and
TreeLoRA keep one optimizer for the whole stream): then the moments and step counts of task
i-1's job continue in task i's. The LR schedule restarts per task; theirs is constant without
warm-up (``train.lr_schedule: constant`` in the TRACE configs), so restarting it changes nothing.
"""

from __future__ import annotations

from codyra.methods.lora import LoRA, LoRAOptions

# the ``adapter`` option of the methods that may carry theirs (TreeLoRA, HiDe-LoRA)
ADAPTER_MODES = ("stream", "per_task_merge")


class CarriedAdapter:
    """A LoRA method's adapter carried from task to task (mixed in before :class:`LoRA`):
    ``carries()`` says whether this run does."""

    kind: str

    def carries(self) -> bool:
        return True

    def setup(self, ctx):
        import torch

        from codyra.store.updates import delta_from_factors, param_block

        groups = super().setup(ctx)
        self.carried, self.base_blocks = {}, {}
        if ctx.task_index == 1 or not self.carries():
            return groups
        previous = ctx.stored_update(ctx.task_index - 1)
        params = dict(ctx.model.named_parameters())
        for t in self.targets:
            adapter = self.adapters[t.name]
            A, B, w = self._previous_adapter(previous, t.name, adapter)
            block = param_block(params[t.param], t.rows)
            self.carried[t.name] = (A, B, w)
            self.base_blocks[t.name] = block.detach().cpu().clone()  # theta_{i-1}, restored exactly in finish
            with torch.no_grad():
                adapter.A.copy_(A)
                adapter.B.copy_(B)
                block.copy_((block.float().cpu() - delta_from_factors(A, B, w)).to(block.dtype))
        return groups

    def _previous_adapter(self, previous, name: str, adapter):
        """(A, B, w) of the adapter the previous task ended with: the first r components of its update."""
        import torch

        r, tensors = adapter.rank, previous.tensors
        if f"{name}.A" not in tensors:
            raise ValueError(
                f"the previous task's update has no adapter for {name!r}: was it trained with this placement?"
            )
        A, B, w = tensors[f"{name}.A"][:r], tensors[f"{name}.B"][:, :r], tensors[f"{name}.w"][:r]
        if A.shape != adapter.A.shape or B.shape != adapter.B.shape or not torch.all(w == adapter.scale):
            raise ValueError(
                f"the previous task's update of {name!r} is not a carried {self.kind} adapter of rank {r} and scale "
                f"{adapter.scale:g} (A {tuple(A.shape)}, gates {w.tolist()[:3]}...): "
                "retrain that task with this method and options"
            )
        return A, B, w

    def stored_factors(self, name, adapter):
        import torch

        A, B, w = adapter.factors()
        if name not in self.carried:
            return A, B, w
        old_A, old_B, old_w = self.carried[name]
        return torch.cat([A, old_A]), torch.cat([B, old_B], dim=1), torch.cat([w, -old_w])

    def restore_base(self, model):
        from codyra.store.updates import param_block

        params = dict(model.named_parameters())
        for t in self.targets:
            if t.name in self.base_blocks:
                param_block(params[t.param], t.rows).copy_(self.base_blocks[t.name])


class SeqLoRA(CarriedAdapter, LoRA):
    kind = "seqlora"
    families = ("clip", "causal_lm")
    paper_row = "SeqLoRA"
    Options = LoRAOptions  # no norm-matched probe: the carried adapter is not one task's update


METHOD = SeqLoRA
