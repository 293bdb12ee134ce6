"""Training one task: stored updates, reconstruction of theta_i, resume after a kill, evaluation."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors import safe_open

from codyra.clip.rebuild import rebuild_clip
from codyra.evaluation.evaluate import evaluate_cell, evaluate_row
from codyra.experiment.train_job import task_checkpoint_dir, train_task
from codyra.store.paths import SUMMARY_FILE, UPDATE_FILE, cell_path, row0_cell_path, task_dir


def state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["codyra", "lora-r4", "seqlora-r4", "full-ft"])
def test_rebuilt_theta_equals_the_trained_model(tiny_run, method):
    for i in (1, 2):
        trained = train_task(tiny_run, method, 0, i)
    rebuilt = rebuild_clip(tiny_run, method, 0, 2).model
    want = state(trained.model)
    for name, tensor in state(rebuilt).items():
        assert torch.equal(tensor, want[name]), name
    summary = json.loads((task_dir(tiny_run, method, 0, 2) / SUMMARY_FILE).read_text())
    assert summary["steps"] == 6 and summary["task"] == "digits"
    assert summary["update_kind"] == ("delta" if method == "full-ft" else "lora")


def test_codyra_summary_reports_ranks_norms_and_counts(tiny_run):
    summary = train_task(tiny_run, "codyra", 0, 1).summary
    matrices = summary["matrices"]
    assert len(matrices) == 18  # 6 per block: 2 vision blocks, 1 text block
    assert all(0 <= m["active_rank"] <= 4 and m["rank_init"] == 4 for m in matrices.values())
    assert summary["active_rank_total"] == sum(m["active_rank"] for m in matrices.values())
    assert summary["dW_fro_total"] == pytest.approx(sum(m["dW_fro"] ** 2 for m in matrices.values()) ** 0.5)
    with safe_open(str(task_dir(tiny_run, "codyra", 0, 1) / UPDATE_FILE), "pt") as f:
        stored = sum(f.get_tensor(k).numel() for k in f.keys())  # noqa: SIM118 (safe_open is not iterable)
    assert summary["stored_params"] == stored


def test_thresholding_prunes_gates_in_the_sparse_phase(tiny_run):
    # kappa_max far above the gate scale: after the dense phase every gate is shrunk to 0
    tiny_run["method_configs"]["codyra"]["kappa_max"] = 10.0
    summary = train_task(tiny_run, "codyra", 0, 1).summary
    assert summary["active_rank_total"] == 0 and summary["stored_params"] == 0
    history = [
        json.loads(line) for line in (task_dir(tiny_run, "codyra", 0, 1) / "history.jsonl").read_text().splitlines()
    ]
    assert [h["kappa"] for h in history[:3]] == [0.0, 0.0, 0.0]  # dense phase: 3 of 6 steps
    assert history[-1]["kappa"] == pytest.approx(10.0) and history[-1]["active_rank_total"] == 0


class Killed(Exception):
    pass


@pytest.mark.slow
@pytest.mark.parametrize("method", ["codyra", "full-ft"])
def test_killed_and_resumed_run_equals_uninterrupted_run(tiny_run, tmp_path, method):
    def kill_at(step):
        def hook(s):
            if s == step:
                raise Killed

        return hook

    with pytest.raises(Killed):
        train_task(tiny_run, method, 0, 1, on_step=kill_at(5))  # checkpoints at steps 2 and 4
    ckpt = task_checkpoint_dir(tiny_run, method, 0, 1)
    assert json.loads((ckpt / "state.json").read_text())["step"] == 4
    assert not (task_dir(tiny_run, method, 0, 1) / UPDATE_FILE).exists()
    resumed = train_task(tiny_run, method, 0, 1)
    assert not ckpt.exists()

    fresh_cfg = {**tiny_run, "results": str(tmp_path / "fresh")}
    uninterrupted = train_task(fresh_cfg, method, 0, 1)
    a, b = state(resumed.model), state(uninterrupted.model)
    assert all(torch.equal(a[k], b[k]) for k in a)

    def history(cfg):  # all but when each step ran
        return [
            {k: v for k, v in json.loads(line).items() if k != "_time"}
            for line in (task_dir(cfg, method, 0, 1) / "history.jsonl").read_text().splitlines()
        ]

    assert history(tiny_run) == history(fresh_cfg)  # the resumed history keeps steps 1-4 from the checkpoint


def test_cells_rows_and_zeroshot_copies(tiny_run):
    train_task(tiny_run, "lora-r4", 0, 1)
    cell = evaluate_cell(tiny_run, "lora-r4", 0, 1, 2)
    assert set(cell) >= {"accuracy", "benchmark", "method", "seed", "i", "j", "task", "num_classes"}
    assert (cell["i"], cell["j"], cell["task"], cell["num_classes"], cell["num_samples"]) == (1, 2, "digits", 10, 40)
    assert 0 <= cell["accuracy"] <= 100
    assert json.loads(cell_path(tiny_run, "lora-r4", 0, 1, 2).read_text()) == cell
    # row 0 is shared; a method that never trains copies it for every row
    zs = evaluate_cell(tiny_run, "zeroshot", 0, 3, 2)
    row0 = json.loads(row0_cell_path(tiny_run, 2).read_text())
    assert zs["accuracy"] == row0["accuracy"] and zs["method"] == "zeroshot" and zs["i"] == 3
    assert row0["method"] == "pretrained" and row0["seed"] is None


def test_a_row_in_one_call_equals_its_cells_one_by_one(tiny_run, tmp_path):
    train_task(tiny_run, "full-ft", 0, 1)
    row = evaluate_row(tiny_run, "full-ft", 0, 1)  # theta_1 built once for the three tasks
    assert [c["j"] for c in row] == [1, 2, 3]
    for j, cell in enumerate(row, start=1):
        cell_path(tiny_run, "full-ft", 0, 1, j).unlink()
        alone = evaluate_cell(tiny_run, "full-ft", 0, 1, j)
        assert {k: v for k, v in alone.items() if k != "seconds"} == {k: v for k, v in cell.items() if k != "seconds"}
    pretrained = evaluate_row(tiny_run, "pretrained", None, 0, [3, 1])
    assert [c["j"] for c in pretrained] == [3, 1] and all(row0_cell_path(tiny_run, j).is_file() for j in (1, 3))
    assert not row0_cell_path(tiny_run, 2).exists()


def test_union_label_space_classifies_over_every_task(tiny_run):
    tiny_run["data"]["label_space"] = "union"
    cell = evaluate_cell(tiny_run, "zeroshot", 0, 0, 2)
    assert cell["num_classes"] == 8 + 10 + 4


def test_evaluation_is_deterministic(tiny_run):
    train_task(tiny_run, "full-ft", 0, 1)
    first = evaluate_cell(tiny_run, "full-ft", 0, 1, 3)["accuracy"]
    cell_path(tiny_run, "full-ft", 0, 1, 3).unlink()
    assert evaluate_cell(tiny_run, "full-ft", 0, 1, 3)["accuracy"] == first


def test_missing_and_corrupted_updates_give_clear_errors(tiny_run):
    with pytest.raises(FileNotFoundError, match=r"task1/update.safetensors.*train those tasks first"):
        evaluate_cell(tiny_run, "codyra", 0, 1, 1)
    train_task(tiny_run, "codyra", 0, 1)
    path = task_dir(tiny_run, "codyra", 0, 1) / UPDATE_FILE
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="corrupted or truncated.*rerun its training job"):
        evaluate_cell(tiny_run, "codyra", 0, 1, 1)


def test_cell_outside_the_grid(tiny_run):
    with pytest.raises(ValueError, match=r"A\[4,1\] is outside the grid"):
        evaluate_cell(tiny_run, "codyra", 0, 4, 1)


def test_official_loss_text_to_image_term_on_hand_computed_values():
    # logit scale 1, orthonormal embeddings: logits[b, c] = image_emb[b] . text_emb[c]
    from codyra.clip.train import supervised_loss

    text = torch.eye(3)
    images = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    labels = torch.tensor([0, 0])  # both images show class 0
    e = torch.e
    image_to_text = (math.log(e + 2) - 1 + math.log(e + 2)) / 2
    # class 0's row: both of its images with target 1 each (not 1/2): -(log softmax([1, 0]) summed)
    # = 2 log(1 + e) - 1; rows 1, 2 (no image) give 0; mean over 2 seen + 3 current rows
    text_to_image = (2 * math.log(1 + e) - 1) / 5
    args = (torch.tensor(1.0) * images @ text.T, labels)
    official = supervised_loss(*args, "official", seen_classes=2, image_trains=True)
    assert official.item() == pytest.approx(image_to_text + text_to_image, rel=1e-6)
    assert supervised_loss(*args, "paper", seen_classes=2).item() == pytest.approx(image_to_text, rel=1e-6)
    # the released code adds the term only when the image tower is adapted
    text_only = supervised_loss(*args, "official", seen_classes=2, image_trains=False)
    assert text_only.item() == pytest.approx(image_to_text, rel=1e-6)


def test_lr_schedules_match_hand_values():
    from codyra.steps.schedules import lr_factor

    # cosine over 5 steps after 1 warm-up step: 1/1, then 0.5 (1 + cos(pi k / 4)), k = 0..3
    cosine = lr_factor("cosine", 5, 1, 2)
    assert [cosine(s) for s in range(5)] == pytest.approx(
        [1.0, 1.0, (1 + math.sqrt(0.5)) / 2, 0.5, (1 - math.sqrt(0.5)) / 2]
    )
    # constant after 2 warm-up steps (1/2, 2/2), whatever the length of the task
    constant = lr_factor("constant", 5, 2, 2)
    assert [constant(s) for s in range(6)] == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    # TRACE / TreeLoRA main.py: get_constant_schedule_with_warmup(num_warmup_steps=0) is the full rate at every step
    assert {lr_factor("constant", 3, 0, 1)(s) for s in range(3)} == {1.0}
    # per epoch after 1 warm-up step: 6 steps of epochs of 2 = 3 epochs at 0.5 (1 + cos(pi e / 3)), e = 0..2
    per_epoch = lr_factor("cosine_per_epoch", 7, 1, 2)
    assert [per_epoch(s) for s in range(7)] == pytest.approx([1.0, 1.0, 1.0, 0.75, 0.75, 0.25, 0.25])
    with pytest.raises(ValueError, match="unknown train.lr_schedule 'linear'"):
        lr_factor("linear", 5, 0, 1)


def test_the_per_epoch_cosine_is_torch_cosine_annealing_stepped_after_each_epoch():
    from codyra.steps.schedules import lr_factor

    # CL-LoRA's models/cllora.py: CosineAnnealingLR(optimizer, T_max=epochs), scheduler.step() after each epoch
    epochs, steps_per_epoch = 45, 7
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.03)
    annealing = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    reference = []
    for _ in range(epochs):
        reference += [optimizer.param_groups[0]["lr"]] * steps_per_epoch
        optimizer.step()
        annealing.step()
    factor = lr_factor("cosine_per_epoch", epochs * steps_per_epoch, 0, steps_per_epoch)
    assert [0.03 * factor(s) for s in range(epochs * steps_per_epoch)] == pytest.approx(reference, rel=1e-12)
    assert reference[-1] > 0  # the last epoch still trains


@pytest.mark.slow
@pytest.mark.parametrize(
    ("schedule", "factors"),
    [("cosine", [0.75, 0.25, 0.0]), ("constant", [1.0, 1.0, 1.0]), ("cosine_per_epoch", [1.0, 0.5, 0.5])],
)
def test_training_follows_the_configured_lr_schedule(tiny_run, schedule, factors):
    # batches of 32 of the 64 training images: epochs of 2 steps (cosine_per_epoch: 2 epochs, 1 then 0.5)
    tiny_run["train"].update(iterations=3, lr_schedule=schedule, batch_size=32)
    train_task(tiny_run, "lora-r4", 0, 1)
    history = [
        json.loads(line) for line in (task_dir(tiny_run, "lora-r4", 0, 1) / "history.jsonl").read_text().splitlines()
    ]
    # each record holds the rate of the next step: cosine over 3 steps, 0.5 (1 + cos(pi s / 3)) after step s
    assert [h["lr"] for h in history] == pytest.approx([tiny_run["train"]["lr"] * f for f in factors])


def test_unknown_lr_schedule_is_a_config_error(tiny_cfg_dict):
    from codyra.errors import ConfigError
    from codyra.experiment.config import load_config

    tiny_cfg_dict["train"]["lr_schedule"] = "linear"
    with pytest.raises(ConfigError, match="lr_schedule"):
        load_config(tiny_cfg_dict)
