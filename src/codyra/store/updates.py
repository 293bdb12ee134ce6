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

Integrity: the summary written beside each update records ``update_digest``, a sha256 of
the tensors (names, dtypes, shapes, values) and the header's kind and targets, not of the
file bytes. ``load_update`` recomputes it and rejects non-finite values, so a corrupted
update that still parses is never merged silently. The summary also records where the update
sits (:func:`placement`: benchmark, method, seed, task index and the digests of the updates
1..i-1 it was trained from); :func:`task_summary` checks that against the folder it is read
from, so a task folder copied from another task, run or stream is never used either.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from codyra.store.io import ResultError, read_json, save_safetensors, write_json
from codyra.store.paths import METHOD_STATE_FILE, SUMMARY_FILE, UPDATE_FILE, task_dir

FORMAT_VERSION = "1"
KINDS = ("lora", "delta", "none")


def delta_from_factors(A: torch.Tensor, B: torch.Tensor, w_scaled: torch.Tensor) -> torch.Tensor:
    """Dense dW = B diag(w) A in fp32 of a ``lora`` update's factors (for merging and reporting, never in training)."""
    return (B.float() * w_scaled.float()) @ A.float()


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
        return {name: self.dense_delta(name) for name in self.entries}

    def merge_order(self):
        """(name, (parameter, row block, dense fp32 delta)) in name order, one delta made at a time: what
        merging reads (a 7B model's deltas of every matrix are 26 GB in fp32 all at once)."""
        for name in sorted(self.entries):
            yield name, self.dense_delta(name)

    @property
    def entries(self):
        """The names an update changes: its targets (``lora``), else its tensors (one per parameter)."""
        return self.targets if self.kind == "lora" else self.tensors

    def dense_delta(self, name: str) -> tuple[str, tuple[int, int] | None, torch.Tensor]:
        if self.kind != "lora":
            return name, None, self.tensors[name].float()
        where, t = self.targets[name], self.tensors
        rows = tuple(where["rows"]) if where["rows"] is not None else None
        return where["param"], rows, delta_from_factors(t[f"{name}.A"], t[f"{name}.B"], t[f"{name}.w"])

    def num_stored(self) -> int:
        return sum(t.numel() for t in self.tensors.values())

    def digest(self) -> str:
        """sha256 of the content (kind, targets, every tensor's name, dtype, shape and values)."""
        return content_digest([self.kind, self.targets], self.tensors)

    def non_finite(self) -> list[str]:
        """Names of tensors holding NaN or infinite values."""
        return _non_finite(self.tensors)


def content_digest(header, tensors: dict[str, torch.Tensor]) -> str:
    """sha256 of a JSON header and every tensor's name, dtype, shape and values."""
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    for name in sorted(tensors):
        t = tensors[name].detach().cpu()
        h.update(json.dumps([name, str(t.dtype), list(t.shape)]).encode())
        h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def _non_finite(tensors: dict[str, torch.Tensor]) -> list[str]:
    return [name for name, t in sorted(tensors.items()) if t.is_floating_point() and not bool(torch.isfinite(t).all())]


def param_block(param: torch.nn.Parameter, rows) -> torch.Tensor:
    """The tensor an update entry changes: the parameter's data or its row block [start, stop)."""
    return param.data if rows is None else param.data[rows[0] : rows[1]]


@torch.no_grad()
def apply_update(model: torch.nn.Module, update: TaskUpdate) -> None:
    params = dict(model.named_parameters())
    for name, (param_name, rows, delta) in update.merge_order():
        check_entry(params, name, param_name, rows, delta)
        block = param_block(params[param_name], rows)
        block.copy_((block.float().cpu() + delta).to(block.dtype))


def check_entry(params: dict, name: str, param_name: str, rows, delta: torch.Tensor) -> None:
    """That update entry ``name`` changes a parameter of the model, in a block of the delta's shape."""
    if param_name not in params:
        raise KeyError(f"update entry {name!r} refers to parameter {param_name!r}, which this model does not have")
    block = param_block(params[param_name], rows)
    if block.shape != delta.shape:
        raise ValueError(f"update {name!r} has shape {tuple(delta.shape)}, parameter block has {tuple(block.shape)}")


def save_update(directory: str | Path, update: TaskUpdate, summary: dict, state: dict | None = None) -> dict:
    """Write the update, the method's state (if any) and the summary, last, with their digests and
    ``stored_bytes`` (returned); refuse non-finite values."""
    directory = Path(directory)
    stored = TaskUpdate(
        update.kind, {k: v.detach().float().contiguous().cpu() for k, v in update.tensors.items()}, update.targets
    )
    bad = stored.non_finite()
    if bad:
        raise ValueError(
            f"training produced non-finite values in {len(bad)} tensor(s) of {directory / UPDATE_FILE} "
            f"(e.g. {bad[0]}): "
            "the task diverged, nothing was stored; lower train.lr (or check the data) and rerun"
        )
    meta = {
        "codyra_kind": update.kind,
        "codyra_format": FORMAT_VERSION,
        "targets": json.dumps(update.targets, sort_keys=True),
    }
    save_safetensors(directory / UPDATE_FILE, stored.tensors, meta)
    summary = {**summary, "update_digest": stored.digest()}
    summary.pop("state_digest", None)
    state_file = directory / METHOD_STATE_FILE
    if state:
        state = {k: v.detach().contiguous().cpu() for k, v in state.items()}
        bad = _non_finite(state)
        if bad:
            raise ValueError(
                f"the method's state holds non-finite values in {bad[0]}: nothing was stored; lower train.lr and rerun"
            )
        save_safetensors(state_file, state, {"codyra_format": FORMAT_VERSION})
        summary["state_digest"] = content_digest([], state)
    else:
        state_file.unlink(missing_ok=True)  # a stale state of an earlier run is never read
    summary["stored_bytes"] = sum(p.stat().st_size for p in (directory / UPDATE_FILE, state_file) if p.is_file())
    write_json(directory / SUMMARY_FILE, summary)  # written last: its presence means the task is done
    return summary


def load_method_state(directory: str | Path) -> dict[str, torch.Tensor] | None:
    """The method state stored beside task ``directory``'s update (None when the method stored
    none), verified against the summary's ``state_digest``."""
    directory = Path(directory)
    recorded = read_json(directory / SUMMARY_FILE).get("state_digest")
    if recorded is None:
        return None
    path = directory / METHOD_STATE_FILE
    try:
        with safe_open(str(path), framework="pt") as f:
            state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except (SafetensorError, OSError) as err:
        raise ResultError(
            f"method state {path} is missing, corrupted or truncated ({err}); {rerun_hint(path)}"
        ) from err
    if content_digest([], state) != recorded:
        raise ResultError(
            f"method state {path} does not match the digest in its summary (changed after training); {rerun_hint(path)}"
        )
    return state


def rerun_hint(path: Path) -> str:
    """How to rerun the training job that writes ``path`` (a task folder's file)."""
    match = re.search(r"([^/]+)/seed(\d+)/task(\d+)/[^/]+$", path.as_posix())
    command = f" or codyra train --method {match[1]} --seed {match[2]} --task {match[3]}" if match else ""
    return f"delete it and rerun its training job: snakemake -f {path}{command}"


def previous_digests(cfg: dict, method: str, seed: int, i: int) -> list[str | None]:
    """The ``update_digest`` the summaries of tasks 1..i-1 of a run record: the updates task i starts from."""
    paths = [task_dir(cfg, method, seed, k) / SUMMARY_FILE for k in range(1, i)]
    return [read_json(path).get("update_digest") if path.is_file() else None for path in paths]


def placement(cfg: dict, method: str, seed: int, i: int) -> dict:
    """Where task i's update sits: the summary's fields that must match the folder it is read from."""
    return {
        "benchmark": cfg["benchmark"],
        "method": method,
        "seed": seed,
        "task_index": i,
        "previous_updates": previous_digests(cfg, method, seed, i),
    }


def task_summary(cfg: dict, method: str, seed: int, i: int) -> dict:
    """Task i's summary, checked against where it sits (:func:`placement`): a task folder of
    another benchmark, method, seed or task, or one trained from other updates 1..i-1 than the
    ones beside it, is a ResultError naming the file, what it claims and what was expected."""
    path = task_dir(cfg, method, seed, i) / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"training summary {path} missing: train that task first (snakemake {path.with_name(UPDATE_FILE)})"
        )
    summary = read_json(path)
    if not isinstance(summary, dict):
        raise ResultError(f"training summary {path} does not hold a JSON object; {rerun_hint(path)}")
    expected = placement(cfg, method, seed, i)
    wrong = {key: summary.get(key) for key, value in expected.items() if summary.get(key) != value}
    if wrong:
        claims = ", ".join(f"{key} {value!r}" for key, value in wrong.items())
        wanted = ", ".join(f"{key} {expected[key]!r}" for key in wrong)
        chain = (
            " (the updates of the tasks before it changed since it was trained)"
            if list(wrong) == ["previous_updates"]
            else ""
        )
        raise ResultError(
            f"task folder {path.parent} does not belong where it sits: {path.name} claims {claims}; "
            f"expected {wanted}{chain}; "
            f"{rerun_hint(path.with_name(UPDATE_FILE))}"
        )
    return summary


def stored_update(cfg: dict, method: str, seed: int, i: int) -> TaskUpdate:
    """Task i's verified update (:func:`load_update`) of a run, checked against where it sits."""
    task_summary(cfg, method, seed, i)
    return load_update(task_dir(cfg, method, seed, i))


def stored_state(cfg: dict, method: str, seed: int, i: int) -> dict[str, torch.Tensor] | None:
    """Task i's verified method state (:func:`load_method_state`) of a run, checked against where it sits."""
    task_summary(cfg, method, seed, i)
    return load_method_state(task_dir(cfg, method, seed, i))


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
        raise ResultError(f"task update {path} is corrupted or truncated ({err}); {rerun_hint(path)}") from err
    if meta.get("codyra_format") != FORMAT_VERSION or meta.get("codyra_kind") not in KINDS:
        raise ResultError(f"{path} is not a codyra task update (header {meta}); {rerun_hint(path)}")
    update = TaskUpdate(meta["codyra_kind"], tensors, json.loads(meta.get("targets", "{}")))
    bad = update.non_finite()
    if bad:
        raise ResultError(
            f"task update {path} holds non-finite values in {len(bad)} tensor(s) (e.g. {bad[0]}); {rerun_hint(path)}"
        )
    summary_path = path.with_name(SUMMARY_FILE)
    recorded = read_json(summary_path).get("update_digest") if summary_path.is_file() else None
    if recorded != update.digest():
        problem = (
            "its summary records no digest"
            if recorded is None
            else f"its content does not match the digest in {summary_path}"
        )
        raise ResultError(
            f"task update {path} cannot be verified: {problem} (changed after training wrote it); {rerun_hint(path)}"
        )
    return update
