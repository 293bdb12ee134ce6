"""TRACE's SeqLoRA: one adapter carried through the tasks, yet every theta_i rebuilt from stored updates."""

from __future__ import annotations

import pytest
import torch

from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.llm.model import pretrained_lm
from codyra.llm.rebuild import rebuild_lm
from codyra.store.paths import task_dir
from codyra.store.updates import delta_from_factors, load_update

RANK, SCALE = 4, 16 / 4
SEQLORA = {"kind": "seqlora", "rank": RANK, "alpha": 16, "dropout": 0.1, "placement": ["q_proj", "v_proj"]}


@pytest.fixture
def cfg(tiny_trace_dict):
    tiny_trace_dict["method_configs"]["seqlora"] = dict(SEQLORA)
    tiny_trace_dict["methods"] = ["seqlora", "lora-qv"]
    return load_config(tiny_trace_dict)


def update(cfg, method, i):
    return load_update(task_dir(cfg, method, 0, i))


def weights(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_one_adapter_is_carried_and_every_theta_is_rebuilt(cfg):
    for i in (1, 2):
        trained = train_task(cfg, "seqlora", 0, i)
    first, second = update(cfg, "seqlora", 1), update(cfg, "seqlora", 2)
    target = next(iter(first.targets))
    # task 1 stores D_1; task 2 stores D_2 - D_1 as [A_2; A_1], [B_2, B_1], gates [+s]*r + [-s]*r
    assert first.tensors[f"{target}.A"].shape[0] == RANK
    assert torch.equal(second.tensors[f"{target}.A"][RANK:], first.tensors[f"{target}.A"])
    assert torch.equal(second.tensors[f"{target}.B"][:, RANK:], first.tensors[f"{target}.B"])
    assert second.tensors[f"{target}.w"].tolist() == [SCALE] * RANK + [-SCALE] * RANK
    # task 2 started from A_1 (no re-initialisation) and trained it further
    assert not torch.equal(second.tensors[f"{target}.A"][:RANK], first.tensors[f"{target}.A"])

    # theta_2 rebuilt from the stored updates is bit-identical to the model training ended with ...
    rebuilt = weights(rebuild_lm(cfg, "seqlora", 0, 2).model)
    for name, tensor in weights(trained.model).items():
        assert torch.equal(rebuilt[name], tensor), name
    # ... and equals theta_0 + D_2: the adapter of task 2 alone, nothing merged on the way
    t = second.tensors
    d2 = delta_from_factors(t[f"{target}.A"][:RANK], t[f"{target}.B"][:, :RANK], t[f"{target}.w"][:RANK])
    torch.testing.assert_close(shift(cfg, rebuilt, second.targets[target]), d2, rtol=1e-4, atol=1e-6)


def shift(cfg, theta, where) -> torch.Tensor:
    """theta - theta_0 on one target's block."""
    block = slice(*where["rows"]) if where["rows"] else slice(None)
    return theta[where["param"]][block] - weights(pretrained_lm(cfg).model)[where["param"]][block]


def test_merge_per_task_lora_sums_two_adapters(cfg):
    for i in (1, 2):
        train_task(cfg, "lora-qv", 0, i)
    first, second = update(cfg, "lora-qv", 1), update(cfg, "lora-qv", 2)
    target = next(iter(second.targets))
    assert second.tensors[f"{target}.A"].shape[0] == RANK  # a fresh adapter: D_1 was merged
    both = first.dense_deltas()[target][2] + second.dense_deltas()[target][2]
    theta2 = weights(rebuild_lm(cfg, "lora-qv", 0, 2).model)
    torch.testing.assert_close(shift(cfg, theta2, second.targets[target]), both, rtol=1e-4, atol=1e-6)


def test_previous_update_of_another_rank_is_refused(cfg):
    train_task(cfg, "seqlora", 0, 1)
    cfg["method_configs"]["seqlora"]["rank"] = 2
    with pytest.raises(ValueError, match="not a carried seqlora adapter of rank 2"):
        train_task(cfg, "seqlora", 0, 2)


def test_carry_optimizer_continues_task_1s_adamw_in_task_2(cfg):
    from codyra.store.updates import load_method_state

    cfg["train"]["carry_optimizer"] = True
    for i in (1, 2):
        train_task(cfg, "seqlora", 0, i)
    first, second = (load_method_state(task_dir(cfg, "seqlora", 0, i)) for i in (1, 2))
    steps = cfg["train"]["iterations"]
    name = next(k for k in first if k.startswith("optimizer.") and k.endswith(".A.step"))
    # one optimizer through the stream: task 2's AdamW took its steps after task 1's
    assert float(first[name]) == steps and float(second[name]) == 2 * steps
    assert {k.rsplit(".", 1)[0] for k in second if k.startswith("optimizer.")} == {
        k.rsplit(".", 1)[0] for k in first if k.startswith("optimizer.")
    }


def test_carry_optimizer_refuses_a_task_trained_without_it(cfg):
    train_task(cfg, "seqlora", 0, 1)
    cfg["train"]["carry_optimizer"] = True
    with pytest.raises(ValueError, match="task 1's stored method state holds no optimizer state"):
        train_task(cfg, "seqlora", 0, 2)
