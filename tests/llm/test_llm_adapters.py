"""The paper's adapter on Hugging Face causal LMs: placement, every projection live, merge."""

from __future__ import annotations

import pytest
import torch
from transformers import GemmaConfig, GemmaForCausalLM, LlamaConfig, LlamaForCausalLM

from codyra.adapters.attach import LoRALinear
from codyra.adapters.targets import select_targets
from codyra.llm.family import CAUSAL_LM
from codyra.llm.targets import LM_VOCABULARY, lm_targets
from codyra.methods import build_method
from codyra.methods.base import standalone_context

LAYERS = 2
KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def tiny_model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "llama":
        config = LlamaConfig(
            hidden_size=64,
            intermediate_size=172,
            num_hidden_layers=LAYERS,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=320,
        )
        return LlamaForCausalLM(config).eval()
    config = GemmaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        vocab_size=320,
    )
    return GemmaForCausalLM(config).eval()


def logits(model) -> torch.Tensor:
    ids = torch.randint(0, 320, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


def adapt(model, spec: dict):
    method = build_method(spec)
    method.setup(standalone_context(model, CAUSAL_LM, torch.Generator().manual_seed(2), 0.0))
    return method


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_targets_are_the_seven_projections_of_every_layer(family):
    model = tiny_model(family)
    targets = lm_targets(model)
    assert len(targets) == 7 * LAYERS
    assert sorted({t.kind for t in targets}) == sorted(KINDS) and {t.tower for t in targets} == {"lm"}
    for t in targets:
        weight = model.get_parameter(t.param)
        assert (t.out_features, t.in_features) == tuple(weight.shape) and t.rows is None
    assert len(select_targets(targets, "attn", LM_VOCABULARY)) == 4 * LAYERS
    assert len(select_targets(targets, ["lm", "mlp"], LM_VOCABULARY)) == 3 * LAYERS
    qv = select_targets(targets, ["q_proj", "v_proj"], LM_VOCABULARY)
    want = [f"model.layers.{i}.self_attn.{k}" for i in range(LAYERS) for k in ("q_proj", "v_proj")]
    assert [t.name for t in qv] == want
    assert [t.name for t in select_targets(targets, "*.layers.1.mlp.*", LM_VOCABULARY)] == [
        f"model.layers.1.mlp.{k}" for k in ("gate_proj", "up_proj", "down_proj")
    ]


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_every_targeted_projection_changes_the_logits(family):
    model = tiny_model(family)
    base = logits(model)
    names = {n for n, _ in model.named_parameters()}
    method = adapt(model, {"kind": "codyra", "rank": 2})
    assert {n for n, _ in model.named_parameters() if ".lora." not in n} == names  # backbone names unchanged
    assert torch.equal(logits(model), base)  # B = 0: the adapted model is the backbone
    for name, adapter in method.adapters.items():
        with torch.no_grad():
            adapter.B.normal_(std=0.5)
        assert not torch.allclose(logits(model), base, atol=1e-4), f"adapter on {name} has no effect"
        with torch.no_grad():
            adapter.B.zero_()


@pytest.mark.parametrize("family", ["llama", "gemma"])
@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "codyra", "rank": 4, "alpha": 8},
        {"kind": "lora", "rank": 8, "alpha": 32, "placement": ["q_proj", "v_proj"]},
    ],
)
def test_merged_backbone_equals_the_adapted_model(family, spec):
    model = tiny_model(family)
    method = adapt(model, spec)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for adapter in method.adapters.values():
            adapter.B.copy_(torch.randn(adapter.B.shape, generator=generator) * 0.1)
            if adapter.gated:
                adapter.w[::2] = 0.0  # pruned components must not reach the merge
    adapted = logits(model)
    _, summary = method.finish(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    torch.testing.assert_close(logits(model), adapted, rtol=0, atol=1e-5)
    if spec["kind"] == "codyra":
        assert summary["active_rank_total"] == 2 * len(method.adapters)


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_trace_lora_baseline_equals_peft_lora(family):
    """TRACE's baseline is peft's LoraConfig(r=8, lora_alpha=32) on q/v: with the same factors, our
    fixed-rank LoRA gives the logits of peft's (an independent implementation)."""
    from peft import LoraConfig, get_peft_model

    model = tiny_model(family)
    reference = get_peft_model(
        tiny_model(family), LoraConfig(r=8, lora_alpha=32, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    ).eval()
    method = adapt(model, {"kind": "lora", "rank": 8, "alpha": 32, "placement": ["q_proj", "v_proj"]})
    generator = torch.Generator().manual_seed(4)
    peft_layers = {n: m for n, m in reference.named_modules() if hasattr(m, "lora_A") and "default" in m.lora_A}
    assert len(peft_layers) == len(method.adapters) == 2 * LAYERS
    with torch.no_grad():
        for name, adapter in method.adapters.items():
            adapter.B.copy_(torch.randn(adapter.B.shape, generator=generator) * 0.1)
            (layer,) = [m for n, m in peft_layers.items() if n.endswith(name)]
            layer.lora_A["default"].weight.copy_(adapter.A)
            layer.lora_B["default"].weight.copy_(adapter.B)
    torch.testing.assert_close(logits(model), logits(reference), rtol=0, atol=1e-5)
    assert not torch.allclose(logits(model), logits(tiny_model(family)), atol=1e-3)  # the update is not trivial
