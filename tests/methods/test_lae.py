"""LAE-LoRA (gqk/LAE) on CLIP: its PET, the offline PET's EMA, the inference ensemble of the online
and offline models (by hand and on a tiny CLIP against merged weights), bad options, and the method
through the real training loop and evaluation on the tiny mini benchmark."""

from __future__ import annotations

import copy
import math

import open_clip
import pytest
import torch
import torch.nn.functional as F

import codyra.clip.model  # noqa: F401 - registers the codyra-mini config
from codyra.clip.evaluate import class_scores
from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.train_job import train_task
from codyra.methods import build_method
from codyra.methods.lae.clip import attach_ensemble
from codyra.methods.lae.pet import LAELoRA, ema_update_, ensemble_probabilities
from codyra.store.paths import task_dir
from codyra.store.updates import load_method_state, load_update


def test_ema_update_is_timms_model_ema_by_hand():
    offline = [torch.tensor([1.0, 2.0]), torch.tensor(1.0)]
    online = [torch.tensor([3.0, 0.0], requires_grad=True), torch.tensor(2.0)]
    ema_update_(offline, online, 0.9)  # 0.9 * off + 0.1 * on
    torch.testing.assert_close(offline[0], torch.tensor([1.2, 1.8]))
    torch.testing.assert_close(offline[1], torch.tensor(1.1))
    ema_update_(offline, online, 0.5)
    torch.testing.assert_close(offline[0], torch.tensor([2.1, 0.9]))
    with pytest.raises(ValueError, match=r"EMA decay must be in \(0, 1\), got 1.0"):
        ema_update_(offline, online, 1.0)


def test_ensemble_is_the_elementwise_max_of_the_two_softmaxes_by_hand():
    online, offline = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([[0.0, 3.0, 0.0]])
    e2, e3 = math.exp(2.0), math.exp(3.0)
    expected = [e2 / (e2 + 2), e3 / (e3 + 2), 1 / (e2 + 2)]  # max(online, offline) per class
    probabilities = ensemble_probabilities(online, offline)
    torch.testing.assert_close(probabilities, torch.tensor([expected]))
    assert int(probabilities.argmax()) == 1  # the more confident offline model decides; the online says class 0
    with pytest.raises(ValueError, match="logits of different shapes"):
        ensemble_probabilities(online, offline[:, :2])


def test_pet_adds_s_b_a_to_the_weight_and_reads_the_member_it_is_told():
    pet = LAELoRA(3, 2, 2, None)
    with torch.no_grad():
        pet.A.copy_(torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]]))
        pet.B.copy_(torch.tensor([[1.0, 1.0], [0.0, 2.0]]))
        pet.s.fill_(0.5)
    x = torch.tensor([[1.0, 2.0, 3.0]])
    # s B A = 0.5 [[1, 1, 2], [0, 2, 0]]; x (s B A)^T = [0.5 * 9, 0.5 * 4]
    torch.testing.assert_close(pet(x), torch.tensor([[4.5, 2.0]]))
    assert pet.s.requires_grad and isinstance(pet.s, torch.nn.Parameter)  # scale: null is learnable
    with pytest.raises(RuntimeError, match="no offline factors yet"):
        pet.use_offline = True
        pet(x)
    pet.use_offline = False
    pet.start_offline()
    with torch.no_grad():
        pet.B.zero_()
    assert pet(x).abs().sum() == 0
    pet.use_offline = True
    torch.testing.assert_close(pet(x), torch.tensor([[4.5, 2.0]]))  # the copy kept the old factors


def tiny_clip():
    torch.manual_seed(0)
    return open_clip.create_model("codyra-mini", pretrained=None).eval()


def pets(model, generator):
    """A state with online and offline PETs on block 0's key and value (random, B nonzero)."""
    e = model.visual.transformer.resblocks[0].attn.embed_dim
    state = {}
    for member in ("online", "offline"):
        for kind in ("k", "v"):
            name = f"visual.transformer.resblocks.0.attn.{kind}"
            state[f"{member}.{name}.A"] = torch.randn(2, e, generator=generator) * 0.2
            state[f"{member}.{name}.B"] = torch.randn(e, 2, generator=generator) * 0.2
            state[f"{member}.{name}.s"] = torch.tensor(0.5 + torch.rand((), generator=generator).item())
    return state


def merged(model, state, member):
    """theta_0 with the member's s B A added to the key and value rows of in_proj_weight."""
    model = copy.deepcopy(model)
    attn = model.visual.transformer.resblocks[0].attn
    e = attn.embed_dim
    with torch.no_grad():
        for block, kind in ((1, "k"), (2, "v")):
            name = f"{member}.visual.transformer.resblocks.0.attn.{kind}"
            delta = state[f"{name}.s"] * state[f"{name}.B"] @ state[f"{name}.A"]
            attn.in_proj_weight[block * e : (block + 1) * e] += delta
    return model


def test_clip_ensemble_equals_the_two_merged_models_softmax_max():
    g = torch.Generator().manual_seed(1)
    base = tiny_clip()
    state = pets(base, g)
    images = torch.randn(5, 3, 32, 32, generator=g)
    classifier = F.normalize(torch.randn(4, base.text_projection.shape[1], generator=g), dim=-1)
    probabilities = []
    for member in ("online", "offline"):
        m = merged(base, state, member)
        logits = m.logit_scale.exp() * F.normalize(m.encode_image(images), dim=-1) @ classifier.T
        probabilities.append(logits.softmax(dim=-1))
    expected = torch.maximum(*probabilities)
    with torch.no_grad():
        model = attach_ensemble(copy.deepcopy(base), state)
        scores = class_scores(model, images, classifier, "fp32")
        torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)
        # encode_image alone is the online model's (probes, features)
        torch.testing.assert_close(
            model.encode_image(images), merged(base, state, "online").encode_image(images), atol=1e-5, rtol=1e-5
        )
        # before the second task there is no offline PET: the online model's plain cosines
        online_only = attach_ensemble(copy.deepcopy(base), {k: v for k, v in state.items() if k.startswith("online")})
        assert not hasattr(online_only, "combine_class_scores")
        torch.testing.assert_close(
            class_scores(online_only, images, classifier, "fp32"),
            F.normalize(merged(base, state, "online").encode_image(images), dim=-1) @ classifier.T,
            atol=1e-5,
            rtol=1e-5,
        )


@pytest.mark.parametrize(
    "options, message",
    [
        ({"ema_decay": 1.0}, "ema_decay: must be < 1, got 1.0"),
        ({"freeze_fraction": -0.1}, "freeze_fraction: must be >= 0, got -0.1"),
        ({"rank": 0}, "rank: must be >= 1, got 0"),
        ({"scale": "learned"}, "scale: must be a number or null, got 'learned'"),
    ],
)
def test_bad_options_are_named(tiny_cfg_dict, options, message):
    with pytest.raises(ValueError, match=message):
        build_method({"kind": "lae", **options})
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"]["lae"] = {"kind": "lae", **options}
    with pytest.raises(ConfigError, match=f"config key method_configs.lae.{message}"):
        load_config(cfg)


def test_more_blocks_than_the_image_encoder_has_is_an_error():
    from codyra.clip.targets import CLIP_VOCABULARY, clip_targets
    from codyra.methods.lae.clip import lae_targets

    targets = clip_targets(tiny_clip())
    assert [t.name for t in lae_targets(targets, CLIP_VOCABULARY, 1)] == [
        "visual.transformer.resblocks.0.attn.k",
        "visual.transformer.resblocks.0.attn.v",
    ]
    with pytest.raises(ValueError, match="blocks: 5 asks for more image-encoder blocks than this model has \\(2\\)"):
        lae_targets(targets, CLIP_VOCABULARY, 5)


def test_lae_trains_three_tasks_and_evaluates_its_ensemble(tiny_run):
    """The real loop, 6 steps a task, the online PET frozen for the first 5 of tasks 2 and 3
    (freeze_fraction 0.9): task 2's offline PET starts as task 1's online one, which the EMA of a
    frozen online PET keeps, so after step 6 it is 0.5 on_1 + 0.5 on_2 (decay 0.5); task 3's is
    0.5 (off_2 / 32 + 31 / 32 on_2) + 0.5 on_3. The backbone never changes; the rows are the ensemble's."""
    tiny_run["method_configs"]["lae"] = {
        "kind": "lae",
        "rank": 2,
        "blocks": 2,
        "ema_decay": 0.5,
        "freeze_fraction": 0.9,
        "train": {"lr": 0.01},
    }
    cfg = load_config(tiny_run)
    states = []
    for task in (1, 2, 3):
        summary = train_task(cfg, "lae", 0, task).summary
        assert load_update(task_dir(cfg, "lae", 0, task)).kind == "none"
        assert summary["trainable_params"] == 4 * (2 * 64 + 64 * 2 + 1)  # k and v of 2 blocks: A, B, s
        states.append(load_method_state(task_dir(cfg, "lae", 0, task)))
    assert not any(k.startswith("offline.") for k in states[0])
    for name in ("visual.transformer.resblocks.0.attn.k", "visual.transformer.resblocks.1.attn.v"):
        for f in ("A", "B", "s"):
            on1, on2, on3 = (s[f"online.{name}.{f}"] for s in states)
            off2, off3 = (s[f"offline.{name}.{f}"] for s in states[1:])
            assert not torch.equal(on2, on1) and not torch.equal(on3, on2)  # step 6 trains
            torch.testing.assert_close(off2, 0.5 * on1 + 0.5 * on2)
            torch.testing.assert_close(off3, 0.5 * (off2 / 32 + 31 / 32 * on2) + 0.5 * on3)
    rows = evaluate_row(cfg, "lae", 0, 3)
    assert [r["j"] for r in rows] == [1, 2, 3] and all(0 <= r["accuracy"] <= 100 for r in rows)
