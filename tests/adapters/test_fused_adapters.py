"""The fused adapter forward, the fp32 path's arithmetic, the TF32 scope and the precision choices."""

from __future__ import annotations

import copy
import threading

import open_clip
import pytest
import torch
import torch.nn.functional as F

import codyra.clip.model  # noqa: F401 - registers the codyra-mini config
from codyra.adapters.attach import fuse_adapters
from codyra.adapters.lora import RankSelectiveLoRA
from codyra.clip.family import CLIP
from codyra.device import fuses_adapters, precision_scope
from codyra.experiment.config import ConfigError, load_config
from codyra.methods import build_method
from codyra.methods.base import standalone_context

CUDA = torch.device("cuda")  # precision_scope only sets torch's switches: no GPU needed to test it


def released_forward(self, x):
    """The adapter's forward as the released arithmetic computes it (casts included)."""
    h = F.linear(self.dropout(x), self.A.to(x.dtype))
    return F.linear(h * (self.w * self.scale).to(x.dtype), self.B.to(x.dtype))


def adapted(kind: str, dtype=torch.float32):
    torch.manual_seed(0)
    model = open_clip.create_model("codyra-mini", pretrained=None).train()
    spec = {"kind": kind, "rank": 4, "alpha": 8, "placement": "all"}  # scale 2: the scale's multiply runs
    if kind == "codyra":
        spec |= {"kappa_max": 0.005, "dense_ratio": 0.5}
    method = build_method(spec)
    groups = method.setup(standalone_context(model, CLIP, torch.Generator().manual_seed(0), 0.0))
    model.to(dtype)  # in place: the optimizer's groups hold the same parameters
    with torch.no_grad():  # B = 0 at init would hide the low-rank path from the forward
        g = torch.Generator().manual_seed(3)
        for adapter in adapters(model).values():
            adapter.B.copy_(torch.randn(adapter.B.shape, generator=g, dtype=dtype) * 0.05)
    return model, method, torch.optim.AdamW(groups, lr=1e-2)


def adapters(model) -> dict[str, RankSelectiveLoRA]:
    return {n: m for n, m in model.named_modules() if isinstance(m, RankSelectiveLoRA)}


def batch(dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    images = torch.randn(4, 3, 32, 32, generator=g).to(dtype)
    text = torch.randint(1, 1000, (3, 24), generator=g)
    text[:, -1] = 49407
    return images, text, torch.tensor([0, 1, 2, 1])


def clip_loss(model, images, text, labels):
    image = F.normalize(model.encode_image(images), dim=-1)
    tokens = F.normalize(model.encode_text(text), dim=-1)
    return F.cross_entropy(model.logit_scale.exp() * image @ tokens.T, labels)


def train(model, method, optimizer, steps=3) -> list[float]:
    losses = []
    for step in range(1, steps + 1):
        loss = clip_loss(model, *batch(next(model.parameters()).dtype))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.after_step(step, 4)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["lora", "codyra"])
def test_fp32_training_keeps_the_released_arithmetic_bit_for_bit(kind, monkeypatch):
    assert not fuses_adapters(torch.device("cpu"), "fp32") and not fuses_adapters(CUDA, "fp32")
    model, method, optimizer = adapted(kind)
    losses = train(model, method, optimizer)
    monkeypatch.setattr(RankSelectiveLoRA, "forward", released_forward)
    reference, ref_method, ref_optimizer = adapted(kind)
    assert losses == train(reference, ref_method, ref_optimizer)
    ours, theirs = adapters(model), adapters(reference)
    for name, adapter in ours.items():
        for tensor in ("A", "B", "w"):
            assert torch.equal(getattr(adapter, tensor), getattr(theirs[name], tensor)), f"{name}.{tensor}"


@pytest.mark.parametrize("kind", ["lora", "codyra"])
def test_the_fused_forward_trains_as_the_unfused_one(kind):
    unfused, method, optimizer = adapted(kind)
    fused, fused_method, fused_optimizer = adapted(kind)
    fuse_adapters(fused, True)
    losses, fused_losses = train(unfused, method, optimizer), train(fused, fused_method, fused_optimizer)
    assert fused_losses == pytest.approx(losses, rel=1e-5)
    theirs = adapters(fused)
    for name, adapter in adapters(unfused).items():
        for tensor in ("A", "B", "w"):
            # Adam's step is about lr wherever a gradient is not ~0, whatever its size: a rounding
            # difference in a near-zero gradient moves a parameter by a fraction of lr (1e-2)
            torch.testing.assert_close(getattr(theirs[name], tensor), getattr(adapter, tensor), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kind", ["lora", "codyra"])
def test_fused_gradients_are_the_unfused_formulas(kind):
    """float64, so the comparison is tight: the fused forward's gradients of A, B and w (the gates)
    against autograd of the per-adapter formula."""
    unfused, _, _ = adapted(kind, torch.float64)
    fused = copy.deepcopy(unfused)
    fuse_adapters(fused, True)
    for model in (unfused, fused):
        clip_loss(model, *batch(torch.float64)).backward()
    theirs = adapters(fused)
    checked = 0
    for name, adapter in adapters(unfused).items():
        for tensor in ("A", "B", "w"):
            expected = getattr(adapter, tensor).grad
            if expected is None:  # LoRA's gates are a constant buffer
                assert tensor == "w" and kind == "lora" and getattr(theirs[name], tensor).grad is None
                continue
            assert expected.abs().sum() > 0, f"{name}.{tensor} has no gradient to compare"
            torch.testing.assert_close(getattr(theirs[name], tensor).grad, expected, rtol=1e-9, atol=1e-12)
            checked += 1
    assert checked == len(theirs) * (3 if kind == "codyra" else 2)


def test_every_wrapper_takes_its_fused_branch(monkeypatch):
    """The fused products run (spied), and the encoders' outputs stay within rounding."""
    from codyra.adapters import attach

    model, _, _ = adapted("codyra")
    images, text, _ = batch()
    with torch.no_grad():
        before = torch.cat([model.encode_image(images), model.encode_text(text)])
    calls = []

    def spy(name):
        original = getattr(attach, name)

        def counted(*args):
            calls.append(name)
            return original(*args)

        return counted

    for name in ("_fused_linear", "_fused_row_blocks"):
        monkeypatch.setattr(attach, name, spy(name))
    fuse_adapters(model, True)
    with torch.no_grad():
        after = torch.cat([model.encode_image(images), model.encode_text(text)])
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-6)
    blocks = len(model.visual.transformer.resblocks) + len(model.transformer.resblocks)
    assert calls.count("_fused_row_blocks") == blocks  # Q, K, V of every attention
    assert calls.count("_fused_linear") == 3 * blocks  # O, fc and proj


def tf32_switches() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


@pytest.fixture
def torch_defaults():
    saved = tf32_switches()
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_tf32_holds_inside_its_scope_only(torch_defaults):
    with precision_scope(CUDA, "tf32"):
        assert tf32_switches() == (True, True)
        with precision_scope(CUDA, "fp32"):  # nested in one thread: the inner scope decides
            assert tf32_switches() == (False, True)
        assert tf32_switches() == (True, True)
    assert tf32_switches() == (False, True)
    with pytest.raises(KeyError), precision_scope(CUDA, "tf32"):
        raise KeyError("a failing step")
    assert tf32_switches() == (False, True)


def test_the_cpu_and_other_precisions_leave_torch_alone(torch_defaults):
    for device, precision in ((torch.device("cpu"), "tf32"), (CUDA, "fp32"), (CUDA, "bf16"), (CUDA, "auto")):
        with precision_scope(device, precision):
            assert tf32_switches() == (False, True), (device, precision)


def test_a_thread_with_other_precision_waits_for_the_tf32_scope_to_close(torch_defaults):
    inside, release, seen = threading.Event(), threading.Event(), []

    def tf32_job():
        with precision_scope(CUDA, "tf32"):
            inside.set()
            release.wait(5)
            seen.append(("tf32 job ends", tf32_switches()))

    def fp32_job():
        with precision_scope(CUDA, "fp32"):
            seen.append(("fp32 job runs", tf32_switches()))

    first = threading.Thread(target=tf32_job)
    first.start()
    assert inside.wait(5)
    second = threading.Thread(target=fp32_job)
    second.start()
    second.join(0.3)
    assert second.is_alive() and not seen  # waits: the switch is the tf32 job's
    release.set()
    first.join(5)
    second.join(5)
    assert seen == [("tf32 job ends", (True, True)), ("fp32 job runs", (False, True))]
    assert tf32_switches() == (False, True)


def test_a_nested_scope_that_would_change_another_threads_switch_raises(torch_defaults):
    inside, release = threading.Event(), threading.Event()

    def tf32_job():
        with precision_scope(CUDA, "tf32"):
            inside.set()
            release.wait(5)

    other = threading.Thread(target=tf32_job)
    other.start()
    assert inside.wait(5)
    try:
        with (
            precision_scope(CUDA, "tf32"),
            pytest.raises(RuntimeError, match="same tf32-or-not choice"),
            precision_scope(CUDA, "fp32"),
        ):
            pass
    finally:
        release.set()
        other.join(5)
    assert tf32_switches() == (False, True)


def test_the_schema_offers_tf32_and_names_the_choices(tiny_cfg_dict):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["train"]["precision"] = cfg.setdefault("eval", {})["precision"] = "tf32"
    loaded = load_config(cfg)
    assert loaded["train"]["precision"] == loaded["eval"]["precision"] == "tf32"
    for section in ("train", "eval"):
        cfg = copy.deepcopy(tiny_cfg_dict)
        cfg.setdefault(section, {})["precision"] = "fp16"
        with pytest.raises(ConfigError, match=rf"{section}\.precision.*auto.*fp32.*tf32.*bf16"):
            load_config(cfg)


@pytest.mark.slow
def test_a_compiled_training_step_gives_the_eager_loss(tiny_run, tmp_path):
    """train.compile: the same losses as the eager steps, to rounding (inductor fuses the kernels
    otherwise); about a minute of compilation on the CPU."""
    import json

    from codyra.experiment.train_job import train_task
    from codyra.store.paths import task_dir

    losses = {}
    for compiled in (False, True):
        cfg = copy.deepcopy(tiny_run)
        cfg["results"] = str(tmp_path / f"compile-{compiled}")
        cfg["train"]["iterations"], cfg["train"]["compile"] = 3, compiled
        train_task(cfg, "lora-r4", 0, 1)
        history = (task_dir(cfg, "lora-r4", 0, 1) / "history.jsonl").read_text().splitlines()
        losses[compiled] = [json.loads(line)["loss"] for line in history]
    assert len(losses[True]) == 3
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)


def wrapped_adapters(count: int, width: int, gated: bool, seed: int) -> list[RankSelectiveLoRA]:
    g = torch.Generator().manual_seed(seed)
    made = [RankSelectiveLoRA(width, width, 3, 6.0, gated=gated, generator=g) for _ in range(count)]
    with torch.no_grad():
        for adapter in made:
            adapter.B.normal_(generator=g)
    return [a.double() for a in made]


def fused_and_unfused_agree(layer, call, *inputs):
    """Outputs and every adapter's gradients of ``call(layer, *inputs)``, fused against unfused."""
    results = []
    for fused in (False, True):
        copy_ = copy.deepcopy(layer)
        fuse_adapters(copy_, fused)
        xs = [x.clone().requires_grad_() for x in inputs]
        out = call(copy_, *xs)
        out.square().sum().backward()
        grads = {n: p.grad for n, p in copy_.named_parameters() if n.startswith("lora") and p.grad is not None}
        results.append((out.detach(), [x.grad for x in xs], grads))
    (out, x_grads, grads), (fused_out, fused_x_grads, fused_grads) = results
    torch.testing.assert_close(fused_out, out, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fused_x_grads, x_grads, rtol=1e-10, atol=1e-12)
    assert grads.keys() == fused_grads.keys() and grads
    for name in grads:
        torch.testing.assert_close(fused_grads[name], grads[name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("gated", [True, False])
def test_a_fused_row_block_linear_is_its_unfused_self(gated):
    from torch import nn

    from codyra.adapters.attach import LoRARowBlockLinear

    base = nn.Linear(8, 24).double()
    blocks = [((8 * i, 8 * (i + 1)), a) for i, a in enumerate(wrapped_adapters(3, 8, gated, 0))]
    layer = LoRARowBlockLinear(base, blocks)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    fused_and_unfused_agree(layer, lambda m, x: m(x), x)


def test_a_fused_sequence_first_attention_is_its_unfused_self(monkeypatch):
    from torch import nn

    from codyra.adapters import attach

    base = nn.MultiheadAttention(8, 2).double()  # sequence-first: the inputs are transposed views
    layer = attach.LoRAMultiheadAttention(base, dict(zip("qkvo", wrapped_adapters(4, 8, True, 0), strict=True)))
    x = torch.randn(5, 2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    stacked = []
    original = attach._fused_row_blocks
    monkeypatch.setattr(attach, "_fused_row_blocks", lambda *args: stacked.append(1) or original(*args))
    fused_and_unfused_agree(layer, lambda m, x: m(x, x, x, need_weights=False)[0], x)
    assert stacked == [1]  # Q, K and V took the stacked products (the fused call only)


@pytest.mark.parametrize("kind", ["lora", "codyra"])
def test_the_fused_backward_hands_every_factor_its_gradient_in_its_own_layout(kind):
    """A gradient that arrives in another layout than its parameter's is copied by AccumulateGrad,
    a kernel outside any compiled graph. The stacked B's of Q, K and V take theirs from the batched
    low-rank product's backward (bmm's own would hand each a transposed view)."""
    model, _, _ = adapted(kind)
    fuse_adapters(model, True)
    arrived = {}
    for name, adapter in adapters(model).items():
        for tensor in ("A", "B", "w"):
            p = getattr(adapter, tensor)
            if p.requires_grad:
                p.register_hook(lambda g, key=f"{name}.{tensor}": arrived.__setitem__(key, g.is_contiguous()))
    clip_loss(model, *batch()).backward()
    assert any(".attn.lora.q.B" in key for key in arrived)  # the stacked path ran
    assert [key for key, contiguous in arrived.items() if not contiguous] == []
