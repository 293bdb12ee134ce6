"""Optimizer parameter groups, learning rate and carried state shared by methods, backends and pretraining."""

from __future__ import annotations


def examples_per_step(hp: dict) -> int:
    """Examples per optimizer step: ``batch_size`` x ``gradient_accumulation``."""
    return hp["batch_size"] * hp["gradient_accumulation"]


def base_lr(hp: dict) -> float:
    """The optimizer's learning rate before its schedule: ``lr``, or with ``lr_reference_batch`` set,
    ``lr`` scaled linearly from a step of that many examples to this run's (google-research/l2p
    ``train_continual.py``: base_learning_rate = learning_rate x global batch / 256)."""
    reference = hp.get("lr_reference_batch")
    return hp["lr"] if reference is None else hp["lr"] * examples_per_step(hp) / reference


def decay_groups(params, weight_decay: float) -> list[dict]:
    """AdamW groups: weight decay on matrices and embeddings (ndim >= 2), none on biases,
    norms and other vectors (the GPT-2 / nanoGPT convention)."""
    params = list(params)
    return [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay, "name": "matrices"},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0, "name": "vectors"},
    ]


# ``train.carry_optimizer``: torch AdamW's per-parameter state of task i-1's job, kept in its
# stored method state as ``optimizer.<parameter name>.<slot>`` and loaded by task i's job
CARRIED_PREFIX = "optimizer."
SLOTS = ("step", "exp_avg", "exp_avg_sq")


def pack_optimizer_state(moments: dict) -> dict:
    """{parameter name: {slot: tensor}} -> flat method-state tensors (fp32 on the CPU; step as [1])."""
    return {
        f"{CARRIED_PREFIX}{name}.{slot}": value.detach()
        .float()
        .cpu()
        .reshape(1 if slot == "step" else value.shape)
        .contiguous()
        for name, slots in moments.items()
        for slot, value in slots.items()
    }


def unpack_optimizer_state(state: dict | None, shapes: dict, task_index: int) -> dict:
    """Task ``task_index - 1``'s carried AdamW state, checked against this job's trainable
    parameters ``shapes`` ({name: shape}); a clear error naming the problem and the fix."""
    import math

    where = f"train.carry_optimizer: task {task_index - 1}'s stored method state"
    retrain = f"retrain task {task_index - 1} with the same method, placement, rank and train.carry_optimizer: true"
    stored: dict = {}
    for key, value in (state or {}).items():
        if key.startswith(CARRIED_PREFIX):
            name, slot = key[len(CARRIED_PREFIX) :].rsplit(".", 1)
            stored.setdefault(name, {})[slot] = value
    if not stored:
        raise ValueError(f"{where} holds no optimizer state (it was trained without train.carry_optimizer): {retrain}")
    missing, unknown = sorted(set(shapes) - set(stored)), sorted(set(stored) - set(shapes))
    if missing or unknown:
        raise ValueError(
            f"{where} is not for this job's trainable parameters (missing {missing[:3]}, unknown {unknown[:3]}): the "
            f"optimizer can continue only over the same parameters; {retrain}"
        )
    moments = {}
    for name, slots in stored.items():
        if set(slots) != set(SLOTS):
            raise ValueError(f"{where} has slots {sorted(slots)} for {name!r}, not {list(SLOTS)}: {retrain}")
        step = slots["step"].reshape(())
        if not math.isfinite(float(step)) or float(step) < 1:
            raise ValueError(
                f"{where} has step {float(step)} for {name!r}: a carried state comes after at least one step; {retrain}"
            )
        for slot in SLOTS[1:]:
            if tuple(slots[slot].shape) != tuple(shapes[name]):
                raise ValueError(
                    f"{where}: {name!r} {slot} has shape {tuple(slots[slot].shape)}, "
                    f"the parameter {tuple(shapes[name])}: {retrain}"
                )
        moments[name] = {"step": step, "exp_avg": slots["exp_avg"], "exp_avg_sq": slots["exp_avg_sq"]}
    return moments
