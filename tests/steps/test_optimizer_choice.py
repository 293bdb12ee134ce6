"""``train.optimizer``: torch SGD (with momentum) as some baselines' references step, beside the
default AdamW; checked against SGD's update computed by hand, through a checkpoint, and its
config errors."""

from __future__ import annotations

import pytest
import torch

from codyra.experiment.config import ConfigError, load_config
from codyra.steps.backends import PlainBackend

from ..conftest import with_train

SGD = {"optimizer": "sgd", "lr": 0.5, "momentum": 0.9, "precision": "fp32"}


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))


def sgd_backend(model, weight_decay=0.1) -> PlainBackend:
    return PlainBackend(model, [{"params": [model.w], "weight_decay": weight_decay}], SGD, torch.device("cpu"))


def step(backend, model, grad):
    model.w.grad = torch.tensor(grad)
    backend.step()


def test_sgd_steps_with_momentum_and_coupled_weight_decay():
    model = Two()
    backend = sgd_backend(model)
    step(backend, model, [1.0, 1.0])
    # d = g + 0.1 w = [1.1, 0.8]; buf = d; w -= 0.5 buf
    assert model.w.tolist() == pytest.approx([1.0 - 0.55, -2.0 - 0.4])
    step(backend, model, [0.0, 2.0])
    # d = [0.045, 1.76]; buf = 0.9 [1.1, 0.8] + d = [1.035, 2.48]; w -= 0.5 buf
    assert model.w.tolist() == pytest.approx([0.45 - 0.5175, -2.4 - 1.24])


def test_an_sgd_checkpoint_resumes_its_momentum(tmp_path):
    from torch.optim.lr_scheduler import LambdaLR

    grads = [[1.0, 1.0], [0.0, 2.0], [-1.0, 0.5]]
    straight = Two()
    backend = sgd_backend(straight)
    for g in grads:
        step(backend, straight, g)

    resumed = Two()
    first = sgd_backend(resumed)
    for g in grads[:2]:
        step(first, resumed, g)
    first.save(tmp_path / "ckpt", 2, LambdaLR(first.optimizer, lambda s: 1.0), [])
    fresh = Two()
    second = sgd_backend(fresh)
    second.load(tmp_path / "ckpt", LambdaLR(second.optimizer, lambda s: 1.0))
    step(second, fresh, grads[2])
    assert torch.equal(fresh.w, straight.w)  # the momentum buffer came back: bit for bit


@pytest.mark.parametrize(
    "train, family, message",
    [
        ({"optimizer": "sgd"}, "causal_lm", "sgd applies to the image families"),
        ({"optimizer": "sgd", "carry_optimizer": True}, "clip", "carry_optimizer continues AdamW's moments"),
        ({"momentum": 0.9}, "clip", r"train.momentum for method '\w+', task '\w+': applies to optimizer sgd"),
    ],
)
def test_optimizer_settings_that_cannot_apply_are_refused(tiny_cfg_dict, train, family, message):
    with pytest.raises(ConfigError, match=message):
        load_config(with_train(tiny_cfg_dict, train, family))


def test_sgd_is_a_valid_setting_of_a_clip_config(tiny_cfg_dict):
    cfg = load_config({**tiny_cfg_dict, "train": {**tiny_cfg_dict["train"], "optimizer": "sgd", "momentum": 0.9}})
    assert (cfg["train"]["optimizer"], cfg["train"]["momentum"]) == ("sgd", 0.9)
