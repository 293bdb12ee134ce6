"""The CLIP baselines' settings in the paper configs, against their references as run."""

from __future__ import annotations

from pathlib import Path

import pytest

from codyra.experiment.config import load_config
from codyra.experiment.resolve import resolve_job

CONFIG = Path(__file__).resolve().parents[2] / "config"
PAPER = ("mtil_5shot", "mtil_5shot_order2", "mtil_full", "xtail_16shot")


def paper(name: str) -> dict:
    return load_config(CONFIG / f"{name}.yaml")


@pytest.mark.parametrize("name", [*PAPER, "mini_baselines"])
def test_rail_fuses_with_weight_0_8_as_rails_config(name):
    """linghan1997/Regression-based-Analytic-Incremental-Learning configs/analytic_clip.yaml:
    fusion_weight 0.8 (since its commit of 2024-10-23; 0.9 before)."""
    from codyra.methods.rail.method import RAILOptions

    cfg = paper(name)
    rails = [m for m, spec in cfg["method_configs"].items() if spec["kind"] in ("rail", "codyra_rail")]
    assert rails
    for method in rails:
        assert cfg["method_configs"][method]["fusion_weight"] == 0.8
    assert RAILOptions().fusion_weight == 0.8 and RAILOptions().prompts == "rail"


# JiazuoYu/MoE-Adapters4CL mtil/scripts/train/*_router11_experts22_1000iters.sh, lr=(...) over
# dataset=(Aircraft Caltech101 CIFAR100 DTD EuroSAT Flowers Food MNIST OxfordPet StanfordCars SUN397)
MOE_DATASETS = (
    "Aircraft",
    "Caltech101",
    "CIFAR100",
    "DTD",
    "EuroSAT",
    "Flowers",
    "Food",
    "MNIST",
    "OxfordPet",
    "StanfordCars",
    "SUN397",
)
MOE_FEW_SHOT_LR = dict(
    zip(MOE_DATASETS, (8e-3, 5e-4, 2e-4, 5e-3, 1e-3, 1e-3, 1e-2, 1e-4, 1e-2, 1e-2, 1e-2), strict=True)
)
MOE_FULL_SHOT_LR = dict(
    zip(MOE_DATASETS, (5e-3, 1e-3, 5e-3, 1e-3, 1e-4, 1e-3, 1e-3, 1e-4, 1e-3, 1e-3, 1e-3), strict=True)
)


@pytest.mark.parametrize(
    "name, lrs, iterations, ae_lr",
    [
        ("mtil_5shot", MOE_FEW_SHOT_LR, 500, 0.003),
        ("mtil_5shot_order2", MOE_FEW_SHOT_LR, 500, 0.003),
        ("xtail_16shot", MOE_FEW_SHOT_LR, 500, 0.003),
        ("mtil_full", MOE_FULL_SHOT_LR, 1000, 0.01),  # AutoEncoder.py: exp_lr_scheduler(..., 0.01)
    ],
)
def test_moe_adapters_trains_as_its_scripts(name, lrs, iterations, ae_lr):
    cfg = paper(name)
    for k, task in enumerate(cfg["tasks"], start=1):
        job = resolve_job(cfg, "moe-adapters", k)
        assert job["train"]["lr"] == lrs[task], task
        assert (job["train"]["iterations"], job["train"]["betas"], job["train"]["warmup_steps"]) == (
            iterations,
            [0.9, 0.999],
            100,
        )
        assert (
            job["method"]["ae_lr"],
            job["method"]["ae_iterations"],
            job["method"]["ae_epoch"],
            job["method"]["ddas_batch_size"],
        ) == (ae_lr, 301, "split", 128)


ZSCL_FAMILY = ("full-ft", "lwf", "lwf-vr", "wise-ft", "zscl")


@pytest.mark.parametrize("name", PAPER)
def test_zscl_family_runs_zscls_scripts(name):
    """Thunderbeee/ZSCL mtil/scripts/{finetune,lwf,lwf_vr,WiSE_finetune,ZSCL}.sh: --iterations 1000,
    --ls 0.2, lr 5e-5 on Aircraft and MNIST and 1e-5 on the rest; args.py --warmup_length 100."""
    cfg = paper(name)
    for method in ZSCL_FAMILY:
        for k, task in enumerate(cfg["tasks"], start=1):
            job = resolve_job(cfg, method, k)
            assert job["train"]["lr"] == (5e-5 if task in ("Aircraft", "MNIST") else 1e-5), (
                method,
                task,
            )
            assert (job["train"]["iterations"], job["train"]["warmup_steps"], job["method"]["label_smoothing"]) == (
                1000,
                100,
                0.2,
            )
    zscl = resolve_job(cfg, "zscl", 1)["method"]
    assert zscl["ensemble_every"] == 100 and resolve_job(cfg, "lwf-vr", 1)["method"]["vocabulary_seed"] == 42


def test_the_uniform_overlay_runs_zscls_family_on_the_platforms_budget():
    base, uniform = paper("mtil_5shot"), paper("mtil_5shot_uniform")
    assert uniform["methods"] == ["zeroshot", *ZSCL_FAMILY] and uniform["benchmark"] != base["benchmark"]
    assert list(uniform["tasks"]) == list(base["tasks"])
    for method in ZSCL_FAMILY:
        for k in range(1, len(uniform["tasks"]) + 1):
            job = resolve_job(uniform, method, k)
            assert (job["train"]["iterations"], job["train"]["lr"], job["method"]["label_smoothing"]) == (
                500,
                1e-5,
                0.0,
            )
        # nothing else changes
        options = {
            key: v
            for key, v in resolve_job(base, method, 1)["method"].items()
            if key not in ("label_smoothing", "ensemble_every")
        }
        assert {key: v for key, v in resolve_job(uniform, method, 1)["method"].items() if key in options} == options
    assert (
        resolve_job(uniform, "zscl", 1)["method"]["ensemble_every"] == 50
    )  # 11 merges over 500 steps, as 100 over 1,000


def test_moe_adapters_ddas_epoch_is_the_whole_splits_loader():
    """few_shot_AutoEncoder.py l.193: num_batches = len(dataset.train_loader) (batch 64): for Aircraft's
    3,334 training images, 53, though the chooser trains on the 5-shot subset."""
    from types import SimpleNamespace

    from codyra.experiment.resolve import resolve_job
    from codyra.methods.moe_adapters.method import MoEAdapters, ddas_epoch_batches

    cfg = paper("mtil_5shot")
    options = MoEAdapters(cfg["method_configs"]["moe-adapters"]).options
    train = resolve_job(cfg, "moe-adapters", 1)["train"]  # the context's resolved training settings
    ctx = SimpleNamespace(task=SimpleNamespace(full_train_size=3334), train=train)
    assert ddas_epoch_batches(ctx, options) == 53
    assert (
        ddas_epoch_batches(ctx, MoEAdapters({**cfg["method_configs"]["moe-adapters"], "ae_epoch": "trained"}).options)
        is None
    )
    assert (
        ddas_epoch_batches(SimpleNamespace(task=SimpleNamespace(full_train_size=None)), options) is None
    )  # the whole split trains


@pytest.mark.parametrize("name", ["mtil_full", "xtail_16shot"])
def test_icarl_runs_zscls_icarl_code(name):
    """Thunderbeee/ZSCL mtil/src/models/icarl.py: lr 5e-5 on Aircraft and MNIST, 1e-5 otherwise; args.py
    --memory_size 10000, --T 2, --ls 0 (icarl.sh passes none); 1,000 iterations as ZSCL's MTIL scripts."""
    cfg = paper(name)
    assert "icarl" in cfg["methods"]
    for k, task in enumerate(cfg["tasks"], start=1):
        job = resolve_job(cfg, "icarl", k)
        assert job["train"]["lr"] == (5e-5 if task in ("Aircraft", "MNIST") else 1e-5), task
        assert (job["train"]["iterations"], job["train"]["warmup_steps"], job["train"]["weight_decay"]) == (
            1000,
            100,
            0,
        )
        options = job["method"]
        assert (options["memory_size"], options["candidates"], options["herding"]) == (10000, 30000, "reference")
        assert (options["temperature"], options["label_smoothing"]) == (2.0, 0.0)
        assert (options["image_weight"], options["text_weight"]) == (1.0, 1.0)


def test_lae_runs_its_vit_lora_config_on_xtail():
    """gqk/LAE config/vit_lora.yaml over config/base/cifar100_order1.yaml: rank 5, learnable scale,
    blocks 0-4, EMA decay 0.9999; Adam lr 0.0028125, weight decay 0, batch 24, no LR schedule."""
    cfg = paper("xtail_16shot")
    assert "lae" in cfg["methods"]
    for k in range(1, len(cfg["tasks"]) + 1):
        job = resolve_job(cfg, "lae", k)
        options, train = job["method"], job["train"]
        assert (options["rank"], options["scale"], options["blocks"], options["ema_decay"]) == (5, None, 5, 0.9999)
        assert (train["lr"], train["batch_size"], train["weight_decay"], train["lr_schedule"]) == (
            0.0028125,
            24,
            0.0,
            "constant",
        )
        assert (train["betas"], train["warmup_steps"], train["iterations"]) == ([0.9, 0.999], 0, 500)


def test_cl_lora_trains_45_epochs_of_32_on_x_tail():
    """JiangpengHe/CL-LoRA exps/vtab.json: init_epochs = later_epochs = 45, batch_size 32, weight_decay 1e-4,
    ffn_num 10, msa [1, 0, 1]; models/cllora.py: SGD, a cosine stepped per epoch; X-TAIL trains 16 images per
    class."""
    import math

    from codyra.data.catalog import EXPECTED, XTAIL

    cfg = paper("xtail_16shot")
    for k, task in enumerate(cfg["tasks"], start=1):
        job = resolve_job(cfg, "cl-lora", k)
        images = 16 * EXPECTED[XTAIL][task].num_classes
        assert job["train"]["iterations"] == 45 * math.ceil(images / 32), task
        assert (job["train"]["batch_size"], job["train"]["weight_decay"]) == (32, 0.0001)
        assert (job["train"]["optimizer"], job["train"]["lr_schedule"]) == ("sgd", "cosine_per_epoch")
        assert (job["method"]["rank"], job["method"]["projections"], job["method"]["kd_weight"]) == (
            10,
            ["q", "v"],
            5.0,
        )


def test_sprompts_trains_30_epochs_of_128_on_full_shot_mtil():
    """iamwangyabin/S-Prompts configs/domainnet_slip.json: init_epoch = epochs = 30, batch_size 128,
    init_weight_decay 5e-4 (first task), weight_decay 2e-4, prompt_length 10; KMeans(n_clusters=5)."""
    import math

    from codyra.data.catalog import EXPECTED, MTIL

    cfg = paper("mtil_full")
    for k, task in enumerate(cfg["tasks"], start=1):
        job = resolve_job(cfg, "sprompts", k)
        assert job["train"]["iterations"] == 30 * math.ceil(EXPECTED[MTIL][task].train / 128), task
        assert (job["train"]["batch_size"], job["train"]["weight_decay"]) == (128, 0.0005 if k == 1 else 0.0002)
        assert (job["train"]["optimizer"], job["train"]["lr_schedule"]) == ("sgd", "cosine_per_epoch")  # sprompt.py
        assert (job["method"]["prompt_length"], job["method"]["clusters"]) == (10, 5)


def google_l2p_steps(images: int, epochs: int, batch: int) -> int:
    """google-research/l2p train_continual.py: num_train_steps = int(images x epochs) // global batch,
    steps_per_epoch = num_train_steps // epochs, num_train_steps = steps_per_epoch x epochs."""
    return (images * epochs // batch // epochs) * epochs


def torch_loader_steps(images: int, epochs: int, batch: int) -> int:
    """Epochs of a torch DataLoader without drop_last: the last batch partial."""
    import math

    return epochs * math.ceil(images / batch)


@pytest.mark.parametrize(
    ("method", "epochs", "batch", "steps"),
    [
        ("l2p", 5, 128, google_l2p_steps),
        ("dualprompt", 5, 192, google_l2p_steps),
        ("diki", 10, 128, torch_loader_steps),
    ],
)
def test_prompt_baselines_train_their_references_epochs_on_full_shot_mtil(method, epochs, batch, steps):
    """google-research/l2p cifar100_l2p.py (5 epochs, 16 per device x 8) and cifar100_dualprompt.py (24 x 8),
    counted down to whole epochs of full batches; lloongx/DIKI configs/MTIL.yaml (max_epoch 10, batch_size 128),
    its DataLoader's last batch partial: epochs over the benchmark's training sets."""
    from codyra.data.catalog import EXPECTED, MTIL

    cfg = paper("mtil_full")
    for k, task in enumerate(cfg["tasks"], start=1):
        job = resolve_job(cfg, method, k)
        assert job["train"]["iterations"] == steps(EXPECTED[MTIL][task].train, epochs, batch), task
        assert job["train"]["batch_size"] == batch
    assert google_l2p_steps(1020, 5, 128) == 35 and torch_loader_steps(1020, 5, 128) == 40  # Flowers, by hand


@pytest.mark.parametrize(("method", "batch", "lr"), [("l2p", 128, 0.015), ("dualprompt", 192, 0.0225)])
def test_l2p_and_dualprompt_run_the_reference_s_lr_scaled_to_their_batch(method, batch, lr):
    """google-research/l2p train_continual.py: base_learning_rate = learning_rate x global batch / 256, with the
    configs' learning_rate 0.03: 0.03 x 128 / 256 and 0.03 x 192 / 256."""
    from codyra.steps.optim import base_lr

    for name in ("mtil_full", "mini_baselines"):
        cfg = paper(name)
        for k in range(1, len(cfg["tasks"]) + 1):
            train = resolve_job(cfg, method, k)["train"]
            assert (train["lr"], train["lr_reference_batch"]) == (0.03, 256)
            if name == "mtil_full":
                assert base_lr(train) == pytest.approx(lr) and train["batch_size"] == batch
            else:  # the mini's batch of 32
                assert base_lr(train) == pytest.approx(0.03 * 32 / 256)


def test_base_lr_scales_the_configured_lr_by_the_examples_of_a_step():
    from codyra.steps.optim import base_lr

    hp = {"lr": 0.03, "batch_size": 16, "gradient_accumulation": 8, "lr_reference_batch": 256}
    assert base_lr(hp) == pytest.approx(0.015)  # 16 x 8 = 128 examples a step
    assert base_lr({**hp, "lr_reference_batch": None}) == 0.03


def test_dualprompt_shares_its_prompt_pool_but_not_its_keys_as_the_reference_config():
    """cifar100_dualprompt.py: shared_prompt_pool True, shared_prompt_key False."""
    for name in ("mtil_full", "mini_baselines"):
        options = resolve_job(paper(name), "dualprompt", 2)["method"]
        assert (options["shared_prompt_pool"], options["shared_prompt_key"]) == (True, False)
