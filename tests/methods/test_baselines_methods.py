"""ZSCL's and TRACE's baselines (LwF, LwF-VR, WiSE-FT, ZSCL, EWC, GEM, OGD) as methods: each runs
its hooks on a tiny CLIP for two tasks, hands its stored state to the next task, and does what its
reference defines (checked against the math of tests/methods/test_baselines_math.py on the real hooks)."""

from __future__ import annotations

import copy

import open_clip
import pytest
import torch
import torch.nn.functional as F

import codyra.clip.model  # noqa: F401 - registers the codyra-mini config
from codyra.clip.family import CLIP
from codyra.methods import build_method
from codyra.methods.base import TaskContext
from codyra.methods.lwf import soft_cross_entropy
from codyra.store.updates import load_method_state, save_update

STEPS = 3


def tiny_clip(seed=0):
    torch.manual_seed(seed)
    return open_clip.create_model("codyra-mini", pretrained=None).train()


TOKENS = open_clip.get_tokenizer("codyra-mini")(["a red circle.", "a blue square.", "a green cross."])


def clip_forward(model, batch):
    """The outputs ClipSession.forward gives a method, over three fixed class prompts."""
    image = F.normalize(model.encode_image(batch["images"]).float(), dim=-1)
    text = F.normalize(model.encode_text(TOKENS).float(), dim=-1)
    return {"logits": model.logit_scale.exp() * image @ text.T, "image_features": image, "text_features": text}


def batch_at(step, task):
    g = torch.Generator().manual_seed(100 * task + step)
    return {"images": torch.randn(4, 3, 32, 32, generator=g), "labels": torch.randint(0, 3, (4,), generator=g)}


class ImageTask:
    """The task side LwF reads: its training images under the evaluation transform (6 fixed images)."""

    images = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(7))

    def train_eval_set(self):
        return [(image, k % 3) for k, image in enumerate(self.images)]


def context(model, task_index, previous_state=None, previous_update=None, cfg=None, family=CLIP):
    return TaskContext(
        model=model,
        family=family,
        targets=CLIP.targets(model),
        vocab=CLIP.vocabulary,
        generator=torch.Generator().manual_seed(task_index),
        weight_decay=0.0,
        task_index=task_index,
        device=torch.device("cpu"),
        previous_state=previous_state,
        theta_0=lambda: family.pretrained(cfg).model,
        forward=clip_forward,
        task_loss=lambda batch, outputs: F.cross_entropy(outputs["logits"], batch["labels"]),
        stored_state=lambda k: previous_state,
        stored_update=lambda k: previous_update,
        cfg=cfg or {"model": {"name": "codyra-mini"}, "data": {"num_workers": 0}},
        method_name="m",
        seed=0,
        task=ImageTask(),
        total_steps=STEPS,
        steps_per_epoch=2,
        task_batches=lambda: (batch_at(step, task_index) for step in range(STEPS)),
    )


def run_task(spec, model, task_index, previous=(None, None), cfg=None, family=CLIP, watch=None, snap=None):
    """The engine's hook order for STEPS plain-SGD steps; returns (method, update, summary, state).
    ``watch(method)`` sees the gradients the optimizer will use, ``snap()`` the weights after each step."""
    method = build_method(spec)
    ctx = context(model, task_index, *previous, cfg=cfg, family=family)
    groups = method.setup(ctx)
    optimizer = torch.optim.SGD([p for g in groups for p in g["params"]], lr=0.05)
    for step in range(1, STEPS + 1):
        batch = batch_at(step, task_index)
        outputs = ctx.forward(model, batch)
        loss = ctx.task_loss(batch, outputs)
        extra = method.extra_loss(ctx, batch, outputs)
        (loss if extra is None else loss + extra).backward()
        method.before_optimizer_step(ctx)
        if watch is not None:
            watch(method)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if snap is not None:
            snap()
        method.after_step(step, STEPS)
    update, summary = method.finish(model)
    return method, update, summary, method.state_to_store()


def weights(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("kind", ["lwf", "lwf_vr", "wise_ft", "ewc", "gem"])
def test_each_method_runs_two_tasks_and_round_trips_its_state(kind, tmp_path):
    model = tiny_clip()
    spec = {"kind": kind, "distill_batch_size": 4} if kind.startswith("lwf") else {"kind": kind}
    _, update, summary, state = run_task(spec, model, 1)
    assert summary["trainable_params"] > 0 and update.kind == "delta"
    if state:
        saved = save_update(tmp_path, update, {**summary, "task_index": 1}, state)
        assert saved["stored_bytes"] > (tmp_path / "update.safetensors").stat().st_size
        loaded = load_method_state(tmp_path)
        assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)
        state = loaded
    _, _, _, state2 = run_task(spec, model, 2, (state or None, update))
    if kind == "gem":  # one memory row per finished task
        first = next(iter(state2))
        assert state2[first].shape[0] == 2 and torch.equal(state2[first][0], state[first][0])
    if kind == "ewc":  # the Fisher keeps growing
        assert all((state2[k] >= state[k]).all() for k in state) and any((state2[k] > state[k]).any() for k in state)


def test_lwf_distils_on_its_own_batch_of_the_tasks_evaluation_images():
    """ZSCL's lwf.sh passes --ref-dataset <current task>: finetune.py (l.140-145) reads it with
    test_preprocess through its own shuffled loader, one batch per step (l.234-246), not the
    training batch. The student starts at the teacher: the loss is the teachers' self-entropy."""
    from codyra.methods.lwf import DISTILL_STREAM
    from codyra.steps.batches import StepBatches, derive_seed

    model = tiny_clip()
    method = build_method({"kind": "lwf", "distill_batch_size": 4})
    ctx = context(model, 1)
    method.setup(ctx)
    sampler = StepBatches(6, 4, derive_seed(0, DISTILL_STREAM), 1, 0, STEPS)
    for step in range(2):  # 6 images in batches of 4: the second batch runs into the next epoch
        images = ImageTask.images[[index for index, _ in sampler.batch(step)]]
        batch = batch_at(step + 1, 1)
        extra = method.extra_loss(ctx, batch, ctx.forward(model, batch))
        with torch.no_grad():
            teacher = clip_forward(model, {"images": images})
        logits = model.logit_scale.exp() * teacher["image_features"] @ teacher["text_features"].T
        entropy = soft_cross_entropy(logits, logits, 2.0) + soft_cross_entropy(logits.T, logits.T, 2.0)
        assert extra.item() == pytest.approx(entropy.item(), rel=1e-5)
        (grad,) = torch.autograd.grad(extra, model.visual.proj)
        assert grad.abs().max() < 1e-5  # the student sits at the teacher: no pull yet
    method.restore_checkpoint({}, 1)  # a resumed job draws step 2's batch again
    assert method.distill.next(ctx.device).shape == (4, 3, 32, 32) and method.distill.step == 2


def test_label_smoothing_turns_the_task_loss_into_zscls_smoothed_cross_entropy():
    """ZSCL's scripts: F.cross_entropy(logits, labels, label_smoothing=0.2) (finetune.py l.224):
    (1 - 0.2) CE + 0.2 * the mean of -log p over the classes."""
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 1.5, 0.0]])
    labels = torch.tensor([0, 2])
    outputs = {"logits": logits, "image_features": torch.zeros(2, 4)}
    batch = {"labels": labels}
    method = build_method({"kind": "full", "label_smoothing": 0.2})
    total = F.cross_entropy(logits, labels) + method.extra_loss(None, batch, outputs)
    logp = logits.log_softmax(dim=1)
    by_hand = [-(0.8 * logp[0, 0] + 0.2 / 3 * logp[0].sum()), -(0.8 * logp[1, 2] + 0.2 / 3 * logp[1].sum())]
    assert total.item() == pytest.approx(float(sum(by_hand) / 2), rel=1e-6)
    assert build_method({"kind": "full"}).extra_loss(None, batch, outputs) is None
    with pytest.raises(ValueError, match="needs an image-text model"):
        method.extra_loss(None, batch, {"logits": logits})


def test_lwf_vr_distils_over_random_token_rows():
    model = tiny_clip()
    method = build_method({"kind": "lwf_vr", "vocabulary_size": 50, "vocabulary_length": 5, "distill_batch_size": 4})
    method.setup(context(model, 1))
    assert method.vocabulary_features.shape == (50, model.text_projection.shape[1])
    assert torch.allclose(method.vocabulary_features.norm(dim=-1), torch.ones(50))


def test_lwf_vr_draws_the_same_vocabulary_at_every_task_as_zscl():
    """ZSCL seeds torch's global generator with 42 at the start of every task's process
    (main.py l.23) before virtual_vocab draws (helpers.py l.56): every task gets the same rows."""
    from codyra.methods.lwf_vr import random_vocabulary

    def vocabulary(task_index, seed):
        method = build_method(
            {
                "kind": "lwf_vr",
                "vocabulary_size": 20,
                "vocabulary_length": 5,
                "distill_batch_size": 4,
                "vocabulary_seed": seed,
            }
        )
        method.setup(context(tiny_clip(), task_index))  # the same teacher: the rows decide
        return method.vocabulary_features

    assert torch.equal(vocabulary(1, 42), vocabulary(2, 42))
    assert not torch.equal(vocabulary(1, None), vocabulary(2, None))  # per (seed, task)
    teacher = tiny_clip().eval()
    tokenizer = open_clip.get_tokenizer("codyra-mini")
    rows = random_vocabulary(
        20,
        5,
        teacher.vocab_size,
        tokenizer.sot_token_id,
        tokenizer.eot_token_id,
        teacher.context_length,
        torch.Generator().manual_seed(42),
    )
    with torch.no_grad():
        expected = F.normalize(teacher.encode_text(rows).float(), dim=-1)
    torch.testing.assert_close(vocabulary(3, 42), expected)


def test_wise_ft_keeps_alpha_of_the_fine_tuned_step():
    plain, wise = tiny_clip(), tiny_clip()
    before = weights(plain)
    _, full_update, _, _ = run_task({"kind": "full"}, plain, 1)
    _, wise_update, _, _ = run_task({"kind": "wise_ft", "alpha": 0.8}, wise, 1)
    for name, delta in full_update.tensors.items():
        assert torch.allclose(wise_update.tensors[name], 0.8 * delta, atol=1e-6), name
    after = weights(wise)
    assert torch.allclose(
        after["visual.proj"], before["visual.proj"] + 0.8 * full_update.tensors["visual.proj"], atol=1e-6
    )


class ReferenceFamily:
    """The CLIP family with theta_0 = a given model (ZSCL's teacher and tokenizer)."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        return getattr(CLIP, name)

    def pretrained(self, cfg):
        from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

        from codyra.clip.model import ClipBundle
        from codyra.data.tasks import ImageConfig

        image = ImageConfig(32, OPENAI_DATASET_MEAN, OPENAI_DATASET_STD)
        return ClipBundle(copy.deepcopy(self.model), open_clip.get_tokenizer("codyra-mini"), image)


def test_zscl_keeps_the_running_mean_of_start_and_snapshots():
    cfg = {
        "model": {"name": "codyra-mini"},
        "data": {"reference": {"kind": "mini-corpus", "size": 16}, "num_workers": 0},
        "mini": {"corpus_size": 30000, "data_seed": 0},
    }
    model = tiny_clip()
    start, snapshots = weights(model), []
    spec = {"kind": "zscl", "ensemble_every": 2, "reference_batch_size": 4}
    method, update, _, _ = run_task(
        spec, model, 1, cfg=cfg, family=ReferenceFamily(tiny_clip(1)), snap=lambda: snapshots.append(weights(model))
    )
    assert method.merges == 2  # after steps 1 and 3 (every 2, and the last)
    assert method.reference_text.shape[0] == 16
    for name in ("visual.proj", "text_projection", "token_embedding.weight"):
        expected = (start[name] + snapshots[0][name] + snapshots[2][name]) / 3
        assert torch.allclose(start[name] + update.tensors[name], expected, atol=1e-6), name


def test_ewc_second_task_penalty_is_half_lambda_fisher_distance():
    model = tiny_clip()
    _, update, _, state = run_task({"kind": "ewc"}, model, 1)
    method = build_method({"kind": "ewc", "strength": 10.0})
    ctx = context(model, 2, state, update)
    method.setup(ctx)
    with torch.no_grad():
        model.visual.proj.add_(0.01)
    expected = 0.5 * 10.0 * (state["fisher.visual.proj"] * 0.01**2).sum()
    value = method.extra_loss(ctx, batch_at(1, 2), {})
    assert value.item() == pytest.approx(expected.item(), rel=1e-4)


def test_gem_projected_gradient_keeps_the_memories_non_decreasing():
    model = tiny_clip()
    _, update, _, state = run_task({"kind": "gem", "eps": 0.0}, model, 1)
    seen = {}

    def watch(method):
        for name, p in method.params.items():
            m = state[f"memory.{name}"].float()
            seen.setdefault(name, []).append(float((m @ p.grad.reshape(-1)).min()))

    run_task({"kind": "gem", "eps": 0.0}, model, 2, (state, update), watch=watch)
    worst = min(min(v) for v in seen.values())
    scale = max(float(state[k].float().norm()) for k in state) ** 2
    assert worst > -1e-4 * scale  # g . m >= 0 up to float rounding (margin 0.5 makes it > 0 where it binds)


def test_ogd_second_task_gradients_are_orthogonal_to_the_basis():
    model = tiny_clip()
    spec = {"kind": "ogd", "rank": 2, "alpha": 2, "placement": ["attn"], "projection": "global"}
    _, update, _, state = run_task(spec, model, 1)
    basis = state["basis"]
    assert basis.shape[1] == 2  # steps 2 and 3: the last epoch of 3 steps at 2 steps per epoch
    assert torch.allclose(basis.T @ basis, torch.eye(2), atol=1e-5)
    products = []

    def watch(method):
        g = torch.cat([p.grad.reshape(-1) for p in method.lora])
        products.append(float((basis.T @ g).abs().max() / g.norm()))

    run_task(spec, model, 2, (state, update), watch=watch)
    assert max(products) < 1e-5
