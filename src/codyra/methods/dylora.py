"""DyLoRA (Valipour et al. 2023): nested-dropout training over ranks.

Every optimizer step draws one rank b uniformly from {rank_min, ..., rank} for all adapters and
trains the truncated update ``B[:, :b] A[:b] * alpha / b``. The official ``dynamic`` module
(Huawei, ``DyLoRA/loralib``) multiplies both truncated factors by sqrt(r / b), so with the LoRA
scale alpha / r the product carries alpha / b; in ``frozen`` mode the first b - 1 components are
detached and only the b-th trains. Frozen is the default: the official training draws b and calls
``model.set_rank(new_rank, frozen=True)`` before every step (``DyLoRA/examples/NLU/examples/
text-classification/run_glue.py``, ``callback_step.on_step_begin``, line 552); ``frozen: false``
(``set_rank``'s default argument, which that training overrides) trains all b. On our adapter
the truncation is a 0/1 mask in its fixed gate buffer and the scale alpha / b; frozen components
get their gradient zeroed, which is what detaching them in the forward does (AdamW still applies
momentum and weight decay to them, as in the reference).

After the task the update merges at ``merge_rank`` (default: the full rank), as the reference
evaluates a model at the rank last set.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option


def sample_rank(generator, rank_min: int, rank_max: int) -> int:
    """b ~ Uniform{rank_min, ..., rank_max} (DyLoRA's p_B)."""
    import torch

    return int(torch.randint(rank_min, rank_max + 1, (1,), generator=generator))


def truncate_(adapter, b: int, alpha: float) -> None:
    """Make ``adapter`` compute the rank-b truncation: gates 1 on components < b, else 0, scale alpha / b."""
    if not 1 <= b <= adapter.rank:
        raise ValueError(f"truncated rank must lie in [1, {adapter.rank}], got {b}")
    adapter.w.zero_()[:b] = 1.0
    adapter.scale = alpha / b


def freeze_lower_(adapter, b: int) -> None:
    """Zero the gradients of components < b - 1 (``frozen`` mode: only the b-th trains)."""
    if adapter.A.grad is None or adapter.B.grad is None:
        raise RuntimeError(
            "dylora frozen mode needs every adapter's .grad: one got none this step (did the forward reach it?)"
        )
    adapter.A.grad[: b - 1] = 0.0
    adapter.B.grad[:, : b - 1] = 0.0


@dataclass(frozen=True)
class DyLoRAOptions(LoRAOptions):
    rank_min: int = option(1, minimum=1, doc="smallest sampled rank")
    frozen: bool = option(
        True, doc="train only the sampled component (the official run_glue.py: set_rank(b, frozen=True)); false: all b"
    )
    merge_rank: int | None = option(None, minimum=1, doc="rank merged after the task (null: rank)")

    def check(self):
        pairs = (("rank_min", self.rank_min), ("merge_rank", self.merge_rank))
        return [(k, f"must be <= rank ({self.rank}), got {v}") for k, v in pairs if v is not None and v > self.rank]


class DyLoRA(LoRA):
    kind = "dylora"
    families = ("clip", "causal_lm")
    paper_row = "DyLoRA"
    after_step_rewrites_parameters = False  # after_step sets the gate buffer and scale
    Options = DyLoRAOptions

    @property
    def alpha(self) -> float:
        return self.options.alpha if self.options.alpha is not None else self.options.rank

    @property
    def merge_rank(self) -> int:
        return self.options.rank if self.options.merge_rank is None else self.options.merge_rank

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        # its own stream, drawn from the task's generator: rank draws never shift the init draws
        self.rank_generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=ctx.generator)))
        self._draw()
        return groups

    def _draw(self) -> None:
        self._truncate(sample_rank(self.rank_generator, self.options.rank_min, self.options.rank))

    def _truncate(self, b: int) -> None:
        import torch

        self.b = b
        with torch.no_grad():
            for adapter in self.adapters.values():
                truncate_(adapter, b, self.alpha)

    def before_optimizer_step(self, ctx):
        if self.options.frozen:
            for adapter in self.adapters.values():
                freeze_lower_(adapter, self.b)

    def after_step(self, step, total_steps):
        if step < total_steps:
            self._draw()

    def step_metrics(self):
        return {"sampled_rank": float(self.b)}

    def checkpoint_state(self):
        """The rank stream after the draw for the next step, and that draw (the truncation is a
        buffer and a scale, not a trained parameter: the checkpoint's parameters do not hold it)."""
        import torch

        return {"rank_generator": self.rank_generator.get_state(), "sampled_rank": torch.tensor(self.b)}

    def restore_checkpoint(self, state, step):
        self.rank_generator.set_state(state["rank_generator"])
        self._truncate(int(state["sampled_rank"]))

    def finish(self, model):
        import torch

        with torch.no_grad():
            for adapter in self.adapters.values():
                truncate_(adapter, self.merge_rank, self.alpha)
        return super().finish(model)


METHOD = DyLoRA
