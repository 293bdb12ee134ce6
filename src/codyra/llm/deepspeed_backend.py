"""DeepSpeed ZeRO-2 training backend (one process per rank, started by torchrun).

ZeRO-2 keeps a full replica of the model on every rank (bf16 when ``train.precision`` is
bf16, or auto on a GPU; fp32 otherwise) but partitions the fp32 master weights, the AdamW moments and the reduced
gradients: after ``engine.step()`` each rank has updated its own slice of the masters, and
an all-gather refreshes every replica from them.

The proximal step therefore cannot act on the replica alone (the next all-gather would undo
it, and bf16 would round it). After every step the gates (the parameter group ``gates``,
which ``Method.after_step`` rewrites in place) are gathered in full fp32 on every rank (one
all-reduce over disjoint fragments: exact), the method's operator runs on them (a pure
function of the values and the step, so every rank computes the same result), and the
result is written back: each rank its own fragment of the masters, and the replica in full.
Masters and replicas then agree on every rank, zeros included (0 is exact in bf16).
``finalize`` checks this at the end of a task (replica digests all-gathered across ranks)
and the summary records the digests.

A method that reads or edits the step's gradient (``before_optimizer_step``: GEM, OGD,
AdaLoRA) gets it as on the plain path: at the accumulation boundary, before ``engine.step()``,
every trainable parameter's ``.grad`` is its full fp32 gradient reduced over ranks (DeepSpeed's
``safe_get_full_grad``), and what the method leaves there is written back into this rank's
gradient partition (``safe_set_full_grad``) before DeepSpeed clips and steps. It costs one
all-reduce per parameter and a full fp32 gradient per rank. EWC reads each micro-batch's
gradient instead, in tensor hooks during the backward, and averages it over the ranks itself
(``codyra.methods.ewc.rank_mean``: one all-reduce per parameter and micro-batch).

Checkpoints gather full fp32 parameters and moments into torch AdamW's state-dict layout
(:mod:`codyra.store.checkpoints`): rank 0 writes them, every rank reads them back into its own
fragments, and the same files resume on any number of ranks or on the plain path. A gather
(checkpoints, ``train.carry_optimizer``'s moments, ``finalize``) reduces ``gather_chunk``
elements at a time onto rank 0's CPU: on the GPU it holds 256 MiB, where the whole fp32 vector
of the trainable parameters, three times for a checkpoint, would be 84 GB for full-parameter 7B.

The fragment bookkeeping is DeepSpeed's ``_hp_mapping`` (what ``safe_get_full_fp32_param``
uses), batched here into one collective per piece. Traps handled: DeepSpeed links optimizer
state fragments lazily after the first step, and links every group after stepping only the
first, leaving later groups (the gates) unlinked; the state is therefore created and linked
up front. ZeRO-1 with bf16 switches to a different optimizer, so only stage 2 is offered.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import os
from pathlib import Path

import torch

from codyra.steps.optim import base_lr
from codyra.store.checkpoints import load_checkpoint, save_checkpoint

PROXIMAL_GROUPS = ("gates",)  # parameter groups Method.after_step rewrites in place
MOMENTS = ("exp_avg", "exp_avg_sq")  # torch AdamW's per-parameter state besides "step"


def init_distributed() -> tuple[int, int, torch.device]:
    """Join the process group torchrun set up; returns (rank, world size, this rank's device).

    The group lives as long as the process (destroyed at exit): DeepSpeed keeps its own handles
    to it across engines, so a process that trains several tasks one after another (a test's
    worker) reuses it, and a second group would not be the one those handles name."""
    cpu = not torch.cuda.is_available()
    if cpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # DeepSpeed JIT-compiles a communication op on first use; cache it in the repository (git-ignored).
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.cwd() / ".torch_extensions"))
    import deepspeed

    if not torch.distributed.is_initialized():
        deepspeed.init_distributed(dist_backend="gloo" if cpu else "nccl")
        atexit.register(end_distributed)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cpu") if cpu else torch.device("cuda", local_rank)
    if not cpu:
        torch.cuda.set_device(device)
    return torch.distributed.get_rank(), torch.distributed.get_world_size(), device


def end_distributed() -> None:
    """Leave the process group together: every rank waits for the others before tearing its side
    down, so no rank's communication threads outlive a peer that already left (gloo then aborts the
    process: "terminate called without an active exception")."""
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def zero2_config(batch_size: int, world_size: int, bf16: bool, clip_norm: float, accumulation: int = 1) -> dict:
    """``batch_size`` is one micro-batch over all ranks; ``accumulation`` micro-batches make a step."""
    if batch_size % world_size:
        raise ValueError(
            f"config key train.batch_size ({batch_size}) must be a multiple of the number of ranks "
            f"({world_size}, llm.deepspeed.nproc): every rank takes an equal share of each batch"
        )
    return {
        "train_batch_size": batch_size * accumulation,
        "train_micro_batch_size_per_gpu": batch_size // world_size,
        "gradient_accumulation_steps": accumulation,
        "zero_optimization": {"stage": 2},
        "bf16": {"enabled": bf16},
        "gradient_clipping": clip_norm,
        "steps_per_print": 2**31 - 1,  # the training loop logs; DeepSpeed stays quiet
    }


class ZeroBackend:
    # elements of fp32 a gather (checkpoints, carried moments, finalize) holds on the device at once:
    # 256 MiB, against 4 bytes per trainable parameter (28 GB for full-parameter 7B) gathered whole
    gather_chunk: int = 2**26

    def __init__(self, model, groups, method, hp: dict, llm: dict, device: torch.device):
        import deepspeed

        self.rank, self.world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        self.device = device
        self.bf16 = hp["precision"] == "bf16" or (hp["precision"] == "auto" and device.type == "cuda")
        names = {id(p): n for n, p in model.named_parameters()}
        self.groups = [list(g["params"]) for g in groups]
        self.trainables = [p for ps in self.groups for p in ps]
        self.names = [names[id(p)] for p in self.trainables]
        self.gates = [p for g in groups if g.get("name") in PROXIMAL_GROUPS for p in g["params"]]
        overrides_after_step = method.overrides("after_step")
        if overrides_after_step and method.after_step_rewrites_parameters and not self.gates:
            raise ValueError(
                f"method {method.kind!r} rewrites parameters after each step but has no {PROXIMAL_GROUPS} "
                "parameter group; under ZeRO only those groups go through the fp32 master weights"
            )
        # a method reading or editing the step's gradients (GEM, OGD, AdaLoRA, DyLoRA frozen)
        self.exposes_gradients = method.overrides("before_optimizer_step")
        scalars = [n for n, p in model.named_parameters() if p.dim() == 0]
        if scalars:  # deepspeed.initialize's broadcast views every parameter as bytes and fails on these
            raise ValueError(f"DeepSpeed cannot broadcast the 0-dim parameter(s) {scalars}; give them shape [1]")
        self.optimizer = torch.optim.AdamW(groups, lr=base_lr(hp), betas=tuple(hp["betas"]), eps=hp["eps"])
        config = zero2_config(
            hp["batch_size"], self.world_size, self.bf16, llm["gradient_clipping"], hp["gradient_accumulation"]
        )
        self.engine, self.zero, _, _ = deepspeed.initialize(model=model, optimizer=self.optimizer, config=config)
        self._create_optimizer_state()
        self._gate_layout = None  # built at the first after_step

    def _create_optimizer_state(self) -> None:
        """Create AdamW's state (zeros, step 0, exactly what its first step would create) and link
        every parameter's fragments to it, so moments can be read and written from the start."""
        inner = self.zero.optimizer
        for flat in self.zero.single_partition_of_fp32_groups:
            state = inner.state[flat]
            if not state:
                state["step"] = torch.tensor(0.0)
                for key in MOMENTS:
                    state[key] = torch.zeros_like(flat, memory_format=torch.preserve_format)
        self.zero._hp_optimizer_states_linked = False
        self.zero._lazy_init_hp_params_optimizer_state()

    def autocast(self):
        return contextlib.nullcontext()  # DeepSpeed already cast the replica

    def forward(self, **inputs):
        return self.engine(**inputs)

    def backward(self, loss: torch.Tensor) -> None:
        # The caller already normalised the loss over the whole step; DeepSpeed steps the optimizer
        # itself on every gradient_accumulation_steps-th engine.step() and only counts the others.
        self.engine.backward(loss, scale_wrt_gas=False)
        if self.exposes_gradients and self.engine.is_gradient_accumulation_boundary():
            self._expose_gradients()  # step() writes them back and steps
        else:
            self.engine.step()

    def step(self) -> None:
        """At an accumulation boundary with exposed gradients: write the method's edits back into
        the partitioned gradients, then ``engine.step()``; otherwise the last micro-batch's
        ``engine.step()`` already stepped."""
        if self.exposes_gradients:
            self._return_gradients()
            self.engine.step()

    @torch.no_grad()
    def _expose_gradients(self) -> None:
        """Give every trainable parameter its full fp32 gradient of the step in ``.grad`` (reduced
        over ranks, identical on every rank), as on the plain path, for ``before_optimizer_step``.
        ZeRO-2 keeps only this rank's partition of it; DeepSpeed's ``safe_get_full_grad`` gathers
        it (TRACE's GEM and OGD read gradients the same way). Beside a bf16 replica the parameter's
        ``grad_dtype`` is lifted for it (torch >= 2.9) until ``_return_gradients``."""
        from deepspeed.utils import safe_get_full_grad

        full = [safe_get_full_grad(p) for p in self.trainables]
        for p, grad in zip(self.trainables, full, strict=True):
            if grad is not None:
                p.grad_dtype = None  # any dtype: the fp32 gradient of a bf16 replica
            p.grad = None if grad is None else grad.detach().float().clone()

    @torch.no_grad()
    def _return_gradients(self) -> None:
        """Write each ``.grad`` (as the method left it) into this rank's gradient partition."""
        from deepspeed.utils import safe_set_full_grad

        grads = [p.grad for p in self.trainables]
        for p in self.trainables:
            p.grad = None  # so that safe_set_full_grad writes the partition, not this full copy
            p.grad_dtype = p.dtype
        for p, grad in zip(self.trainables, grads, strict=True):
            if grad is not None:
                safe_set_full_grad(p, grad)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        torch.distributed.all_reduce(tensor)
        return tensor

    @torch.no_grad()
    def gather(self, params: list, key: str | None = None) -> list[torch.Tensor] | None:
        """Full fp32 values of ``params`` (key None: master weights; else that AdamW moment) on the
        CPU of rank 0, which writes them; None on the other ranks (a collective: call it on all)."""
        out = [torch.empty(p.shape, dtype=torch.float32) for p in params] if self.rank == 0 else None
        for index, start, values in self._pieces(params, key):
            if out is not None:
                out[index].view(-1).narrow(0, start, values.numel()).copy_(values)
        return out

    def _pieces(self, params: list, key: str | None):
        """``gather``'s values, ``gather_chunk`` elements at a time on the device: yields (parameter
        index, offset in its flattened values, values on the device, valid on rank 0 until the next
        piece). The parameters are laid end to end; each rank fills its own fragments of a piece with
        the rest zero, and one reduce onto rank 0 sums them (exact: the fragments are disjoint)."""
        starts = list(itertools.accumulate((p.numel() for p in params), initial=0))
        total = starts[-1]
        if total == 0:
            return
        buffer = torch.empty(min(self.gather_chunk, total), dtype=torch.float32, device=self.device)
        first = 0  # the first parameter not wholly before the piece
        for begin in range(0, total, len(buffer)):
            end = min(begin + len(buffer), total)
            piece = buffer[: end - begin].zero_()
            overlapping = []
            for index in range(first, len(params)):
                if starts[index] >= end:
                    break
                if starts[index + 1] > begin:
                    overlapping.append(index)
                mapping = params[index]._hp_mapping
                if mapping is None:  # no fragment of it on this rank
                    continue
                where = mapping.lp_fragment_address
                low = max(begin, starts[index] + where.start)
                high = min(end, starts[index] + where.start + where.numel)
                if low < high:
                    fragment = mapping.get_hp_fragment(key)
                    inside = low - starts[index] - where.start
                    piece[low - begin : high - begin].copy_(fragment[inside : inside + high - low])
            torch.distributed.reduce(piece, dst=0)
            for index in overlapping:
                low, high = max(begin, starts[index]), min(end, starts[index + 1])
                yield index, low - starts[index], piece[low - begin : high - begin]
            while first < len(params) and starts[first + 1] <= end:
                first += 1

    @staticmethod
    @torch.no_grad()
    def _write_fragment(param, full: torch.Tensor, key: str | None = None) -> None:
        """Store this rank's fragment of ``full`` into the masters (key None) or an AdamW moment."""
        mapping = param._hp_mapping
        if mapping is not None:
            where = mapping.lp_fragment_address
            mapping.get_hp_fragment(key).copy_(full.flatten().narrow(0, where.start, where.numel))

    @torch.no_grad()
    def after_step(self, method, step: int, total: int) -> None:
        if not self.gates:
            method.after_step(step, total)
            return
        if self._gate_layout is None:
            self._gate_layout = _GateLayout(self.zero, self.gates, self.device)
        masters = self._gate_layout.gather()
        all_masters = self.all_sum(masters)  # each rank filled its own fragments: the sum is exact
        replicas = [p.data for p in self.gates]
        for p, master in zip(self.gates, all_masters.split(self._gate_layout.sizes), strict=True):
            p.data = master.view(p.shape)  # the method's operator runs on the fp32 masters, in place
        try:
            method.after_step(step, total)
        finally:
            self._gate_layout.write(all_masters)
            for p, replica in zip(self.gates, replicas, strict=True):
                p.data = replica  # back to the view into DeepSpeed's flat buffer

    @torch.no_grad()
    def save(self, directory, step: int, scheduler, history: list, method_state: dict | None = None) -> None:
        masters = self.gather(self.trainables)
        moments = {key: self.gather(self.trainables, key) for key in MOMENTS}
        if self.rank == 0:
            state, index = {}, 0
            for g, params in enumerate(self.groups):
                step_count = self.zero.optimizer.state[self.zero.single_partition_of_fp32_groups[g]]["step"]
                for _ in params:
                    state[index] = {"step": step_count.clone(), **{k: moments[k][index] for k in MOMENTS}}
                    index += 1
            snapshot = _StateDict({"state": state, "param_groups": self._param_groups()})
            params = dict(zip(self.names, masters, strict=True))
            save_checkpoint(
                directory,
                step=step,
                params=params,
                optimizer=snapshot,
                scheduler=scheduler,
                history=history,
                method_state=method_state,
            )
        torch.distributed.barrier()

    @torch.no_grad()
    def load(self, directory, scheduler) -> tuple[int, list]:
        values = {n: torch.zeros(p.shape) for n, p in zip(self.names, self.trainables, strict=True)}
        loaded = _StateDict()
        step, history = load_checkpoint(directory, params=values, optimizer=loaded, scheduler=scheduler)
        state = loaded.value["state"]
        for index, (name, p) in enumerate(zip(self.names, self.trainables, strict=True)):
            full = values[name].to(self.device)
            self._write_fragment(p, full)
            p.data.copy_(full)
            for key in MOMENTS:
                self._write_fragment(p, state[index][key].to(self.device), key)
        index = 0
        for g, params in enumerate(self.groups):
            self.zero.optimizer.state[self.zero.single_partition_of_fp32_groups[g]]["step"].copy_(state[index]["step"])
            index += len(params)
        for group, saved in zip(self.optimizer.param_groups, loaded.value["param_groups"], strict=True):
            group.update({k: v for k, v in saved.items() if k != "params"})
        return step, history

    @torch.no_grad()
    def moments(self) -> dict:
        """Full fp32 AdamW state per parameter on rank 0, which stores it; {} on the other ranks
        (a collective: call it on all ranks)."""
        gathered = {key: self.gather(self.trainables, key) for key in MOMENTS}
        if self.rank != 0:
            return {}
        out, index = {}, 0
        for g, params in enumerate(self.groups):
            step = self.zero.optimizer.state[self.zero.single_partition_of_fp32_groups[g]]["step"]
            for _ in params:
                out[self.names[index]] = {
                    "step": step.detach().float().cpu().clone(),
                    **{k: gathered[k][index] for k in MOMENTS},
                }
                index += 1
        return out

    @torch.no_grad()
    def load_moments(self, moments: dict) -> None:
        """Every rank writes its fragments of the moments; a group's step is its parameters' (one value)."""
        for name, p in zip(self.names, self.trainables, strict=True):
            for key in MOMENTS:
                self._write_fragment(p, moments[name][key].to(self.device), key)
        index = 0
        for g, params in enumerate(self.groups):
            steps = {float(moments[n]["step"]) for n in self.names[index : index + len(params)]}
            if len(steps) > 1:
                raise ValueError(
                    f"train.carry_optimizer: the carried steps of parameter group {g} differ ({sorted(steps)}); "
                    "ZeRO keeps one per group"
                )
            if steps:
                self.zero.optimizer.state[self.zero.single_partition_of_fp32_groups[g]]["step"].fill_(steps.pop())
            index += len(params)

    def _param_groups(self) -> list[dict]:
        """The client optimizer's hyperparameters with torch's parameter numbering."""
        out, start = [], 0
        for group, params in zip(self.optimizer.param_groups, self.groups, strict=True):
            hyperparameters = {k: v for k, v in group.items() if k != "params"}
            out.append({**hyperparameters, "params": list(range(start, start + len(params)))})
            start += len(params)
        return out

    @torch.no_grad()
    def finalize(self) -> None:
        """Check that every rank's replica is the same (their digests) and that rank 0's equals the
        masters (rounded to the replica's dtype): then every replica does. Rank 0, which runs
        ``Method.finish``, gets the exact fp32 masters in its module (on the CPU, where it merges)."""
        masters = self.gather(self.trainables)
        digest = hashlib.sha256()
        consistent = True
        for index, p in enumerate(self.trainables):
            replica = p.data.detach().cpu()
            digest.update(replica.float().numpy().tobytes())
            if masters is not None:
                consistent &= torch.equal(replica, masters[index].to(replica.dtype))
        digests: list = [None] * self.world_size
        torch.distributed.all_gather_object(digests, (digest.hexdigest(), bool(consistent)))
        if len({d for d, _ in digests}) != 1 or not all(ok for _, ok in digests):
            raise RuntimeError(f"ZeRO replicas disagree across ranks or with their fp32 masters: {digests}")
        self._report = {
            "backend": "deepspeed-zero2",
            "world_size": self.world_size,
            "precision": "bf16" if self.bf16 else "fp32",
            "replica_sha256_by_rank": [d for d, _ in digests],
        }
        if masters is not None:
            for p, master in zip(self.trainables, masters, strict=True):
                p.data = master

    def report(self) -> dict:
        return self._report

    def close(self) -> None:
        """Release the engine; the process group stays for the process's next task (``init_distributed``)."""
        self.engine.destroy()


class _GateLayout:
    """Where the gates' values live in DeepSpeed's flat buffers, as index tensors computed once, so
    that a step's gather of the gates' fp32 masters and their write-back (this rank's fragments of
    the masters, and the full replica) are a few indexed copies per parameter group, not a copy
    per gate: with hundreds of adapted matrices the per-gate copies cost more than the step's
    proximal operator itself. The values moved are those of the per-gate path (``gather``,
    ``_write_fragment``, a replica ``copy_``), bit for bit."""

    def __init__(self, zero, gates: list, device: torch.device):
        self.sizes = [p.numel() for p in gates]
        self.total = sum(self.sizes)
        self.device = device
        masters, replicas = {}, {}  # group -> (positions in the group's buffer, positions in the gates' vector)
        offset = 0
        for p, size in zip(gates, self.sizes, strict=True):
            replica = p.data
            group, flat16 = self._replica_group(zero, replica)
            start = (replica.data_ptr() - flat16.data_ptr()) // replica.element_size()
            _append(replicas, group, range(start, start + size), range(offset, offset + size))
            mapping = p._hp_mapping
            if mapping is not None:  # this rank holds a fragment of the gate's masters
                lp, hp = mapping.lp_fragment_address, mapping.hp_fragment_address
                partition = zero.single_partition_of_fp32_groups[mapping.param_group_index]
                fragment = mapping.get_hp_fragment()
                if fragment.data_ptr() != partition.data_ptr() + hp.start * partition.element_size():
                    raise RuntimeError("DeepSpeed's fp32 fragment of a gate is not where its address says")
                where = range(hp.start, hp.start + hp.numel)
                _append(
                    masters, mapping.param_group_index, where, range(offset + lp.start, offset + lp.start + lp.numel)
                )
            offset += size
        self.masters = {g: _indices(pair, device) for g, pair in masters.items()}
        self.replicas = {g: _indices(pair, device) for g, pair in replicas.items()}
        self.zero = zero

    @staticmethod
    def _replica_group(zero, replica: torch.Tensor) -> tuple[int, torch.Tensor]:
        """The parameter group whose flat low-precision buffer the replica ``replica`` is a view of."""
        for group, flat in enumerate(zero.bit16_groups_flat):
            begin = flat.data_ptr()
            if begin <= replica.data_ptr() < begin + flat.numel() * flat.element_size():
                return group, flat
        raise RuntimeError("a gate's replica is not a view into DeepSpeed's flat parameter buffers")

    def gather(self) -> torch.Tensor:
        """The gates' fp32 masters as one vector: this rank's fragments, zeros elsewhere."""
        out = torch.zeros(self.total, dtype=torch.float32, device=self.device)
        for group, (inside, outside) in self.masters.items():
            out.index_copy_(0, outside, self.zero.single_partition_of_fp32_groups[group].index_select(0, inside))
        return out

    def write(self, masters: torch.Tensor) -> None:
        """``masters`` (every gate, full) into this rank's fragments and into the full replica."""
        for group, (inside, outside) in self.masters.items():
            self.zero.single_partition_of_fp32_groups[group].index_copy_(0, inside, masters.index_select(0, outside))
        for group, (inside, outside) in self.replicas.items():
            flat = self.zero.bit16_groups_flat[group]
            flat.index_copy_(0, inside, masters.index_select(0, outside).to(flat.dtype))


def _append(layout: dict, group: int, inside: range, outside: range) -> None:
    pair = layout.setdefault(group, ([], []))
    pair[0].extend(inside)
    pair[1].extend(outside)


def _indices(pair: tuple[list, list], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.tensor(positions, dtype=torch.long, device=device) for positions in pair)


class _StateDict:
    """Stands in for the optimizer in codyra.store.checkpoints: hands out or receives a state dict."""

    def __init__(self, value: dict | None = None):
        self.value = value

    def state_dict(self) -> dict:
        return self.value

    def load_state_dict(self, value: dict) -> None:
        self.value = value
