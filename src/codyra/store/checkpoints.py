"""Resumable training checkpoints in safetensors + JSON (nothing is ever unpickled).

A checkpoint belongs to one set of settings: its folder is ``checkpoint-<key>`` with the
key a fingerprint of everything that determines the update (the job's settings and the
updates it starts from). A job resumes only from its own key's checkpoint; any other is
stale (the settings changed since it was written) and is deleted with a log line.

A checkpoint directory holds ``tensors.safetensors`` (trainable parameters, optimizer
moments, torch RNG state) and ``state.json`` (step, scheduler, optimizer hyperparameters,
metric history). It is written into a temporary directory and renamed into place, so a
kill at any moment leaves either the previous checkpoint or the new one.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from codyra.store.io import save_safetensors

TENSORS, STATE = "tensors.safetensors", "state.json"
METHOD_PREFIX = "method."  # the method's mid-task state among the checkpoint's tensors
PREFIX = "checkpoint"
log = logging.getLogger(__name__)


def checkpoint_dir(task_folder: Path, key: str) -> Path:
    """The checkpoint folder of settings ``key`` in a task folder; stale ones, and the temporary
    folders of writes that failed or were killed, are discarded."""
    mine = f"{PREFIX}-{key}"
    for path in sorted(task_folder.glob(f"*{PREFIX}*")) if task_folder.is_dir() else []:
        if path.name.startswith(f".{PREFIX}"):
            log.warning("removing %s: a checkpoint write that never finished", path)
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.startswith(PREFIX) and not path.name.startswith(mine):
            log.warning(
                "discarding checkpoint %s: written with other settings than this job's (%s), so never resumed",
                path,
                key,
            )
            shutil.rmtree(path, ignore_errors=True)
    return task_folder / mine


def save_checkpoint(
    directory: Path, *, step: int, params: dict, optimizer, scheduler, history: list, method_state: dict | None = None
) -> None:
    """``method_state``: the method's mid-task tensors (:meth:`codyra.methods.base.Method.checkpoint_state`)."""
    tensors = {f"param.{n}": p.detach().float().cpu().contiguous() for n, p in params.items()}
    tensors.update({f"{METHOD_PREFIX}{k}": v.detach().cpu().contiguous() for k, v in (method_state or {}).items()})
    opt_state = optimizer.state_dict()
    for idx, slots in opt_state["state"].items():
        for key, value in slots.items():
            tensors[f"opt.{idx}.{key}"] = value.detach().cpu().contiguous()
    tensors["rng.torch"] = torch.get_rng_state()
    state = {
        "step": step,
        "scheduler": scheduler.state_dict(),
        "param_groups": opt_state["param_groups"],
        "history": history,
    }
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.parent / f".{directory.name}.{secrets.token_hex(4)}"
    os.mkdir(tmp)  # not tempfile.mkdtemp: its 0700 would stick to the renamed folder; the umask applies
    try:
        save_safetensors(tmp / TENSORS, tensors)
        (tmp / STATE).write_text(json.dumps(state))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = directory.with_name(directory.name + ".old")
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(directory: Path, *, params: dict, optimizer, scheduler) -> tuple[int, list]:
    """Restore in place; returns (completed steps, metric history)."""
    tensors = load_file(str(directory / TENSORS))
    state = json.loads((directory / STATE).read_text())
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(tensors[f"param.{name}"].to(p.dtype))
    slots: dict = {}
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, idx, slot = key.split(".", 2)
            slots.setdefault(int(idx), {})[slot] = value
    optimizer.load_state_dict({"state": slots, "param_groups": state["param_groups"]})
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(tensors["rng.torch"])
    return state["step"], state["history"]


def load_method_checkpoint(directory: Path) -> dict:
    """The method's mid-task tensors saved with the checkpoint ({} when it saved none)."""
    with safe_open(str(directory / TENSORS), framework="pt") as f:
        return {k[len(METHOD_PREFIX) :]: f.get_tensor(k) for k in f.keys() if k.startswith(METHOD_PREFIX)}  # noqa: SIM118


def find_checkpoint(directory: Path) -> Path | None:
    """The newest complete checkpoint, including one left as ``.old`` by a kill mid-rename."""
    for candidate in (directory, directory.with_name(directory.name + ".old")):
        if (candidate / STATE).is_file() and (candidate / TENSORS).is_file():
            return candidate
    return None
