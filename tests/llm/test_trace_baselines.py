"""TRACE's regularisation baselines (EWC, GEM, OGD) in the causal-LM family: two
tasks of the tiny mini TRACE, the second starting from the first's stored state."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from codyra.experiment.train_job import train_task
from codyra.store.paths import METHOD_STATE_FILE, task_dir

SPECS = {
    "ewc": {"kind": "ewc", "train": {"lr": 0.001}},
    "gem": {"kind": "gem", "train": {"lr": 0.001}},
    "ogd": {"kind": "ogd", "rank": 4, "alpha": 16, "dropout": 0.1, "placement": ["q_proj", "v_proj"]},
}


@pytest.mark.parametrize("method", sorted(SPECS))
def test_trace_baseline_trains_two_tasks_from_its_stored_state(tiny_trace, method):
    tiny_trace["method_configs"][method] = SPECS[method]
    states = []
    for task in (1, 2):
        summary = train_task(tiny_trace, method, 0, task).summary
        assert summary["steps"] == 6 and summary["stored_bytes"] > 0
        states.append(load_file(str(task_dir(tiny_trace, method, 0, task) / METHOD_STATE_FILE)))
    first, second = states
    if method == "ogd":  # 4 steps per epoch of 16 examples: the basis grows by the last epoch's 4 steps
        assert first["basis"].shape[1] == 4 and second["basis"].shape[1] == 8
        b = second["basis"]
        assert torch.allclose(b.T @ b, torch.eye(8), atol=1e-4)
        assert torch.allclose(b[:, :4], first["basis"], atol=1e-5)
    elif method == "gem":
        assert all(second[k].shape[0] == 2 and torch.equal(second[k][0], first[k][0]) for k in first)
    else:
        assert all((second[k] >= first[k]).all() for k in first)


@pytest.mark.parametrize("kind", ["treelora", "hidelora"])
def test_treelora_and_hidelora_carry_one_adapter_and_one_optimizer(tiny_trace, kind):
    """As ZinYY/TreeLoRA runs them: task 2 trains task 1's adapter further (its update is
    [A_2; A_1], gates [+s; -s]) with task 1's AdamW state; 2 micro-batches per step."""
    from codyra.store.updates import load_method_state, load_update

    tiny_trace["method_configs"][kind] = {"kind": kind, "rank": 4, "alpha": 16, "placement": ["q_proj", "v_proj"]}
    tiny_trace["train"].update(batch_size=2, gradient_accumulation=2, carry_optimizer=True)
    for task in (1, 2):
        assert train_task(tiny_trace, kind, 0, task).summary["steps"] == 6
    first, second = (load_update(task_dir(tiny_trace, kind, 0, task)) for task in (1, 2))
    target = next(iter(first.targets))
    assert torch.equal(second.tensors[f"{target}.A"][4:], first.tensors[f"{target}.A"])
    assert second.tensors[f"{target}.w"].tolist() == [4.0] * 4 + [-4.0] * 4
    state = load_method_state(task_dir(tiny_trace, kind, 0, 2))
    assert {float(v) for k, v in state.items() if k.startswith("optimizer.") and k.endswith(".step")} == {12.0}
