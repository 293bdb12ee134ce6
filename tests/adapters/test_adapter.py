"""The CoDyRA adapter: forward, placement on open_clip, merge, proximal step, gradients."""

from __future__ import annotations

import copy

import numpy as np
import open_clip
import pytest
import torch
from torch import nn

import codyra.clip.model  # noqa: F401 - registers the codyra-mini config
from codyra.adapters.attach import (
    LoRALinear,
    LoRAMultiheadAttention,
)
from codyra.adapters.lora import RankSelectiveLoRA
from codyra.adapters.sparsity import kappa_at, soft_threshold_
from codyra.adapters.targets import select_targets
from codyra.clip.family import CLIP
from codyra.clip.targets import CLIP_VOCABULARY, clip_targets
from codyra.methods import build_method
from codyra.methods.base import standalone_context
from codyra.store.updates import apply_update


def tiny_clip(seed=0):
    torch.manual_seed(seed)
    return open_clip.create_model("codyra-mini", pretrained=None).eval()


def inputs(batch=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(batch, 3, 32, 32, generator=g)
    text = torch.randint(1, 1000, (batch, 24), generator=g)
    text[:, -1] = 49407  # an EOT token so text pooling picks a real position
    return images, text


def outputs(model, images, text):
    with torch.no_grad():
        return torch.cat([model.encode_image(images), model.encode_text(text)])


def randomize_B(adapters, seed=2):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for a in adapters.values():
            a.B.normal_(0, 0.05, generator=g)


def test_forward_is_frozen_layer_plus_explicit_component_sum():
    g = torch.Generator().manual_seed(0)
    base = nn.Linear(7, 5)
    adapter = RankSelectiveLoRA(7, 5, rank=3, alpha=6.0, gated=True, generator=g)
    with torch.no_grad():
        adapter.B.normal_(generator=g)
    layer = LoRALinear(base, adapter)
    x = torch.randn(4, 7, generator=g)
    explicit = base.weight.clone()
    for i in range(3):  # dW = alpha/r * sum_i w_i B[:, i] A[i, :]
        explicit += 2.0 * adapter.w[i] * torch.outer(adapter.B[:, i], adapter.A[i])
    expected = x @ explicit.T + base.bias
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)
    assert layer.weight is base.weight  # the backbone parameter is shared, not copied


def test_init_A_kaiming_bound_B_zero_w_normal():
    g = torch.Generator().manual_seed(0)
    a = RankSelectiveLoRA(400, 30, rank=16, alpha=16, gated=True, generator=g)
    assert a.A.abs().max() <= 1 / 400**0.5 and a.A.abs().max() > 0.9 / 400**0.5
    assert torch.count_nonzero(a.B) == 0
    assert a.w.std() > 0.3  # N(0, 1) draws, not ones
    fixed = RankSelectiveLoRA(400, 30, rank=16, alpha=16, gated=False, generator=g)
    assert not isinstance(fixed.w, nn.Parameter) and torch.equal(fixed.w, torch.ones(16))


@pytest.mark.parametrize("batch_first", [True, False])
def test_split_in_proj_attention_matches_multihead_attention(batch_first):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=batch_first).eval()
    adapters = {k: RankSelectiveLoRA(16, 16, 2, 2, gated=True) for k in "qkvo"}
    ours = LoRAMultiheadAttention(mha, adapters).eval()
    x = torch.randn(2, 5, 16) if batch_first else torch.randn(5, 2, 16)
    causal = torch.full((5, 5), float("-inf")).triu(1)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    for kwargs in ({}, {"attn_mask": causal}, {"key_padding_mask": padding}, {"attn_mask": causal.isinf()}):
        want = mha(x, x, x, need_weights=False, **kwargs)[0]
        got = ours(x, x, x, need_weights=False, **kwargs)[0]
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_clip_has_six_targets_per_block_and_placement_subsets():
    model = tiny_clip()
    targets = clip_targets(model)
    assert len(targets) == (2 + 1) * 6  # 2 vision blocks and 1 text block x (q, k, v, o, fc, proj)
    pick = lambda p: {(t.tower, t.kind) for t in select_targets(targets, p, CLIP_VOCABULARY)}
    assert pick("attn") == {(tw, k) for tw in ("vision", "text") for k in "qkvo"}
    assert pick(["vision", "mlp"]) == {("vision", "fc"), ("vision", "proj")}
    assert pick(["text", "o"]) == {("text", "o")}
    names = [t.name for t in select_targets(targets, "*.resblocks.0.attn.v", CLIP_VOCABULARY)]
    assert names == ["visual.transformer.resblocks.0.attn.v", "transformer.resblocks.0.attn.v"]


@pytest.mark.parametrize("bad", ["attention", ["vision", "ffn"], [], [3]])
def test_unknown_placement_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="placement"):
        select_targets(clip_targets(tiny_clip()), bad, CLIP_VOCABULARY)


def attached(model, kind="codyra", placement="all", rank=4):
    method = build_method({"kind": kind, "rank": rank, "placement": placement})
    method.setup(standalone_context(model, CLIP, torch.Generator().manual_seed(0), 0.01))
    return method


def test_adapters_with_zero_B_leave_the_model_unchanged():
    model = tiny_clip()
    images, text = inputs()
    before = outputs(model, images, text)
    attached(model)
    torch.testing.assert_close(outputs(model, images, text), before, atol=1e-5, rtol=1e-5)


def test_every_adapter_changes_the_output_once_its_B_is_nonzero():
    model = tiny_clip()
    images, text = inputs()
    method = attached(model)
    base = outputs(model, images, text)
    g = torch.Generator().manual_seed(3)
    for name, adapter in method.adapters.items():
        with torch.no_grad():  # random, not constant: LayerNorm removes a shift shared by all channels
            adapter.B.normal_(0, 0.1, generator=g)
        changed = (outputs(model, images, text) - base).abs().max()
        with torch.no_grad():
            adapter.B.zero_()
        assert changed > 1e-4, f"adapter {name} does not reach the output"


def test_merge_equals_unmerged_model_and_restores_plain_modules():
    model = tiny_clip()
    images, text = inputs()
    method = attached(model)
    randomize_B(method.adapters)
    unmerged = outputs(model, images, text)
    _update, summary = method.finish(model)
    assert not any(isinstance(m, (LoRALinear, LoRAMultiheadAttention)) for m in model.modules())
    assert isinstance(model.visual.transformer.resblocks[0].attn, nn.MultiheadAttention)
    torch.testing.assert_close(outputs(model, images, text), unmerged, atol=1e-5, rtol=1e-5)
    # r = 4; every block (width 64, mlp 128): Q, K, V, O 4 * (64 + 64), FC and Proj 4 * (64 + 128);
    # 2 vision blocks and 1 text block; 18 gate vectors of 4 (6 per block)
    block = 4 * 4 * 128 + 2 * 4 * 192
    assert summary["trainable_params"] == 3 * block + 18 * 4


def test_codyra_trains_only_A_B_w():
    model = tiny_clip()
    groups = attached(model)
    images, text = inputs()
    model.train()
    loss = model.encode_image(images).square().mean() + model.encode_text(text).square().mean()
    loss.backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad and all(n.rsplit(".", 1)[-1] in ("A", "B", "w") for n in with_grad)
    assert all(not p.requires_grad for n, p in model.named_parameters() if ".lora" not in n)
    del groups


def test_weight_decay_on_A_and_B_only():
    model = tiny_clip()
    method = build_method({"kind": "codyra", "rank": 4})
    groups = method.setup(standalone_context(model, CLIP, torch.Generator().manual_seed(0), 0.01))
    by_name = {g["name"]: g for g in groups}
    assert by_name["lora_AB"]["weight_decay"] == 0.01 and by_name["gates"]["weight_decay"] == 0.0
    gates = {id(a.w) for a in method.adapters.values()}
    assert {id(p) for p in by_name["gates"]["params"]} == gates
    assert not gates & {id(p) for p in by_name["lora_AB"]["params"]}


def test_paper_proximal_operator_on_hand_picked_values():
    w = torch.tensor([0.3, -0.3, 0.1, -0.1, 0.05, 0.0, 0.11])
    soft_threshold_(w, 0.1, "paper")  # |x| <= 0.1 -> 0, else shrink toward 0 by 0.1
    torch.testing.assert_close(w, torch.tensor([0.2, -0.2, 0.0, 0.0, 0.0, 0.0, 0.01]))


def test_official_proximal_operator_follows_the_released_statements():
    # Released code: x > k -> x - k; x < -k -> x + k; then |x| < k -> 0 (all strict). Binary-exact values.
    w = torch.tensor([0.75, -0.75, 0.4, -0.3, 0.5, -0.5, 0.25, -0.25, 0.1, 0.0])
    soft_threshold_(w, 0.25, "official")
    # 0.4 -> 0.15 < k -> 0; 0.5 -> 0.25, not < k -> kept; |x| == k is never shrunk and never zeroed
    expected = torch.tensor([0.5, -0.5, 0.0, 0.0, 0.25, -0.25, 0.25, -0.25, 0.0, 0.0])
    assert torch.equal(w, expected)
    w = torch.tensor([0.25, -0.25])
    soft_threshold_(w, 0.25, "paper")  # the paper's operator zeroes the tie
    assert torch.equal(w, torch.zeros(2))


def released_staircase(total, ratio, kappa_max):
    """The threshold each iteration of the released training loop prunes with (None: no pruning)."""
    levels = np.linspace(0, kappa_max, 50)
    dense = ratio * total
    stride = int((total - dense) // 50)
    index, out = 0, []
    for iteration in range(total):
        if stride > 0 and iteration >= dense and iteration % stride == 0:
            index += 1
        out.append(levels[min(49, index)] if iteration > dense else None)
    return out


def test_linear_kappa_schedule():
    # T = 100, dense ratio 0.7: no thresholding through step 70, then a ramp to kappa_max at step 100
    assert kappa_at(70, 100, 0.7, 0.005) == 0.0
    assert kappa_at(85, 100, 0.7, 0.005) == pytest.approx(0.0025)
    assert kappa_at(100, 100, 0.7, 0.005) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="schedule"):
        kappa_at(90, 100, 0.5, 0.1, "cosine")


@pytest.mark.parametrize(
    ("total", "ratio", "expected"),
    [
        # T = 500, ratio 0.5: D = 250, stride 5; level 1 at iteration 250 (step 251) but pruning starts at
        # step 252, already with level 1; level 2 from step 256; the top level from step 491.
        (500, 0.5, {251: 0, 252: 1, 255: 1, 256: 2, 490: 48, 491: 49, 500: 49}),
        # T = 500, ratio 0.7: D = 350, stride 3; iteration 350 is no multiple of 3: level 1 from step 352.
        (500, 0.7, {351: 0, 352: 1, 354: 1, 355: 2, 495: 48, 496: 49}),
        # T = 333, ratio 0.7: D = 233.1 (unrounded), stride 1: level 1 from step 235.
        (333, 0.7, {234: 0, 235: 1, 236: 2, 283: 49}),
        # T = 314, ratio 0.5: D = 157, stride 3: the first pruning step (158 -> step 159) uses level 0.
        (314, 0.5, {158: 0, 159: 0, 160: 1}),
        # T = 90, ratio 0.5: 45 sparse iterations, stride 0: the released code never raises the threshold.
        (90, 0.5, {46: 0, 47: 0, 90: 0}),
    ],
)
def test_staircase_kappa_schedule_matches_the_released_loop(total, ratio, expected):
    kappa_max = 0.0049  # levels are multiples of 0.0001
    for step, level in expected.items():
        assert kappa_at(step, total, ratio, kappa_max, "staircase") == pytest.approx(level * 1e-4, abs=1e-12)
    reference = released_staircase(total, ratio, kappa_max)
    ours = [kappa_at(step, total, ratio, kappa_max, "staircase") for step in range(1, total + 1)]
    assert ours == [0.0 if r is None else float(r) for r in reference]  # bit for bit, every step


def test_pruned_components_stay_exactly_zero_and_are_not_stored():
    model = tiny_clip()
    method = attached(model)
    randomize_B(method.adapters)
    adapters = list(method.adapters.values())
    with torch.no_grad():
        adapters[0].w[:2] = 0.0
        adapters[1].w[:] = 0.0
    for _ in range(3):  # repeated thresholding never revives a zero gate
        for a in adapters:
            soft_threshold_(a.w.data, 0.01)
    assert torch.count_nonzero(adapters[0].w[:2]) == 0 and torch.count_nonzero(adapters[1].w) == 0
    images, text = inputs()
    out = outputs(model, images, text)
    update, summary = method.finish(model)
    first, second = (t.name for t in method.targets[:2])
    assert update.tensors[f"{first}.A"].shape[0] == 2 and f"{second}.A" in update.tensors
    assert update.tensors[f"{second}.A"].shape[0] == 0
    assert summary["matrices"][second]["active_rank"] == 0 and summary["matrices"][second]["dW_fro"] == 0.0
    torch.testing.assert_close(outputs(model, images, text), out, atol=1e-5, rtol=1e-5)


def test_step_metrics_count_the_surviving_gates_of_every_adapter():
    model = tiny_clip()
    method = attached(model)
    adapters = list(method.adapters.values())
    rank, n = adapters[0].w.numel(), len(adapters)
    with torch.no_grad():
        adapters[0].w[:3] = 0.0
        adapters[-1].w[:] = 0.0
        adapters[1].w[0] = -0.0  # a negative zero is pruned too
    total = n * rank - 3 - rank - 1
    metrics = method.step_metrics()
    assert all(metrics[k].dim() == 0 for k in ("active_rank_mean", "active_rank_total"))  # no read: no device sync
    read = {k: v.item() if isinstance(v, torch.Tensor) else v for k, v in metrics.items()}
    assert read == {"active_rank_mean": total / n, "active_rank_total": float(total), "kappa": 0.0}
    assert total == sum(a.active_rank() for a in adapters)  # the per-adapter count agrees


@pytest.mark.slow
def test_vit_b16_rank16_parameter_count_and_all_144_adapters_reach_the_output():
    model = open_clip.create_model("ViT-B-16", pretrained=None)
    method = build_method({"kind": "codyra", "rank": 16})
    method.setup(standalone_context(model, CLIP, torch.Generator().manual_seed(0), 0.01))
    assert len(method.adapters) == 144
    factors = sum(a.A.numel() + a.B.numel() for a in method.adapters.values())
    gates = sum(a.w.numel() for a in method.adapters.values())
    assert (factors, gates) == (4_423_680, 2_304)
    # With B = 0 the output depends on B exactly where the adapter is on the compute path:
    # one backward pass checks all 144 at once (the out_proj trap would give a zero gradient).
    images = torch.randn(1, 3, 224, 224)
    text = torch.randint(1, 1000, (1, 77))
    text[0, 10] = 49407
    (model.encode_image(images).sum() + model.encode_text(text).sum()).backward()
    dead = [n for n, a in method.adapters.items() if a.B.grad is None or a.B.grad.abs().max() == 0]
    assert dead == []
    # and literally: a non-zero B on an out_proj adapter changes the image embedding
    attn = model.visual.transformer.resblocks[0].attn
    with torch.no_grad():
        before = model.encode_image(images)
        attn.lora["o"].B.normal_(0, 0.01)
        assert (model.encode_image(images) - before).abs().max() > 1e-4


def test_update_roundtrip_applies_the_same_delta(tmp_path):
    from codyra.store.updates import load_update, save_update

    model = tiny_clip()
    reference = copy.deepcopy(model)
    method = attached(model, kind="lora", rank=2)
    randomize_B(method.adapters)
    update, summary = method.finish(model)
    save_update(tmp_path, update, summary)
    apply_update(reference, load_update(tmp_path))
    for (n, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items(), strict=True):
        assert torch.equal(a, b), n
