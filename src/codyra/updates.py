"""Per-task updates: how they are stored, loaded and merged into a backbone.

theta_i = theta_0 + update_1 + ... + update_i, applied in task order in fp32 on the CPU by
``apply_update``. Training merges its own update with the same function, so the model a
training job ends with and the one an evaluation job rebuilds are the same tensors.

Kinds (recorded in the safetensors header):
- ``lora``: factors of the surviving components per target, ``{target}.A`` [r', k],
  ``{target}.B`` [d, r'], ``{target}.w`` [r'] (gates times alpha / r); the header maps each
  target to its backbone parameter and row block.
- ``delta``: dense ``theta_after - theta_before`` per trained parameter (full fine-tuning).
- ``none``: no change (zero-shot).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from codyra.adapters.lora import delta_from_factors
from codyra.io import atomic_write, write_json
from codyra.paths import SUMMARY_FILE, UPDATE_FILE

FORMAT_VERSION = "1"
KINDS = ("lora", "delta", "none")


@dataclass
class TaskUpdate:
    kind: str
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    # lora only: target name -> {"param": backbone parameter, "rows": [start, stop] or None}
    targets: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown update kind {self.kind!r}")

    def dense_deltas(self) -> dict[str, tuple[str, tuple[int, int] | None, torch.Tensor]]:
        """target or parameter name -> (parameter, row block, dense fp32 delta)."""
        if self.kind == "lora":
            out = {}
            for name, where in self.targets.items():
                t = self.tensors
                rows = tuple(where["rows"]) if where["rows"] is not None else None
                out[name] = (where["param"], rows, delta_from_factors(t[f"{name}.A"], t[f"{name}.B"], t[f"{name}.w"]))
            return out
        return {name: (name, None, delta.float()) for name, delta in self.tensors.items()}

    def num_stored(self) -> int:
        return sum(t.numel() for t in self.tensors.values())


def param_block(param: torch.nn.Parameter, rows) -> torch.Tensor:
    """The tensor an update entry changes: the parameter's data or its row block [start, stop)."""
    return param.data if rows is None else param.data[rows[0] : rows[1]]


@torch.no_grad()
def apply_update(model: torch.nn.Module, update: TaskUpdate) -> None:
    params = dict(model.named_parameters())
    for name, (param_name, rows, delta) in sorted(update.dense_deltas().items()):
        if param_name not in params:
            raise KeyError(f"update entry {name!r} refers to parameter {param_name!r}, which this model does not have")
        block = param_block(params[param_name], rows)
        if block.shape != delta.shape:
            raise ValueError(f"update {name!r} has shape {tuple(delta.shape)}, parameter block has {tuple(block.shape)}")
        block.copy_((block.float().cpu() + delta).to(block.dtype))


def save_update(directory: str | Path, update: TaskUpdate, summary: dict) -> None:
    directory = Path(directory)
    meta = {"codyra_kind": update.kind, "codyra_format": FORMAT_VERSION, "targets": json.dumps(update.targets)}
    tensors = {k: v.detach().float().contiguous().cpu() for k, v in update.tensors.items()}
    atomic_write(directory / UPDATE_FILE, lambda tmp: save_file(tensors, tmp, metadata=meta))
    write_json(directory / SUMMARY_FILE, summary)  # written last: its presence means the task is done


def load_update(directory: str | Path) -> TaskUpdate:
    path = Path(directory) / UPDATE_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"task update not found: {path}. Train that task first (snakemake {path}, or codyra train ...)."
        )
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except (SafetensorError, OSError) as err:
        raise ValueError(
            f"task update {path} is corrupted or truncated ({err}); delete it and rerun its training job"
        ) from err
    if meta.get("codyra_format") != FORMAT_VERSION or meta.get("codyra_kind") not in KINDS:
        raise ValueError(f"{path} is not a codyra task update (header {meta}); delete it and rerun its training job")
    return TaskUpdate(meta["codyra_kind"], tensors, json.loads(meta.get("targets", "{}")))
