"""A killed job resumes bit-identically for every method that carries mid-task state beyond the
trainable parameters and the optimizer: ZSCL's weight ensemble, EWC's running
Fisher, GEM's step count, OGD's collected gradients, AdaLoRA's importance EMAs and final pattern,
DyLoRA's rank stream, TreeLoRA's accumulators, bandit and round counter (with and without a carried
optimizer), LAE's offline PETs, MoE-Adapters' expert choice counts; LwF rebuilds its teacher from
theta_{i-1}, iCaRL its teacher and memory stream,
CL-LoRA and S-Prompts their attached modules; L2P's prompts and DIKI's prefixes, attached to the
frozen CLIP, resume with the model's parameters (DIKI recomputes its task's Gaussian from theta_0).

Each method trains tasks 1 and 2 of the tiny mini benchmark (6 steps, checkpoints at steps 2 and 4);
task 2 is killed after step 5 and resumed after the process's RNG is scrambled, as a fresh process
would find it. Its stored update, method state and history must equal those of an uninterrupted run.
Every kind that keeps mid-task state (overrides ``checkpoint_state``) is among them.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from codyra.experiment.train_job import task_checkpoint_dir, train_task
from codyra.methods import available_kinds, method_class
from codyra.methods.base import Method
from codyra.store.checkpoints import find_checkpoint, load_method_checkpoint
from codyra.store.paths import HISTORY_FILE, METHOD_STATE_FILE, UPDATE_FILE, task_dir

# method -> (spec, checkpoint keys the method must have saved at step 4 of task 2)
METHODS = {
    "zscl": ({"kind": "zscl", "ensemble_every": 2}, {"average.", "merges"}),
    "ewc": ({"kind": "ewc"}, {"fisher."}),
    "gem": ({"kind": "gem"}, set()),
    "ogd": ({"kind": "ogd", "rank": 4}, {"collected"}),  # 4 steps per epoch: collects steps 3-6
    "lwf": ({"kind": "lwf"}, set()),
    # steps 2-4 allocate (PEFT's cubic schedule), step 5 is the final allocation from the EMAs
    "adalora": ({"kind": "adalora", "rank": 4, "target_r": 2}, {"ipt.", "unc.", "pattern."}),
    # final allocation at step 3: the checkpoint holds the pattern re-applied after steps 5 and 6
    "adalora-final": ({"kind": "adalora", "rank": 4, "target_r": 2, "tfinal": 0.5}, {"pattern."}),
    "dylora": ({"kind": "dylora", "rank": 4, "frozen": False}, {"rank_generator", "sampled_rank"}),
    "dylora-frozen": ({"kind": "dylora", "rank": 4, "frozen": True}, {"rank_generator", "sampled_rank"}),
    "treelora": (
        {"kind": "treelora", "rank": 4},
        {"bandit.sim", "bandit.counts", "bandit.generator", ".accumulated", "rounds"},
    ),
    # task 2 starts from task 1's stored AdamW state; the checkpoint's own optimizer state replaces it on resume
    "treelora-carry": ({"kind": "treelora", "rank": 4, "train": {"carry_optimizer": True}}, {"bandit.sim", "rounds"}),
    # the offline PETs' EMA, over steps 4-6 past the frozen steps 1-3
    "lae": ({"kind": "lae", "rank": 2, "blocks": 2, "ema_decay": 0.5, "freeze_fraction": 0.5}, {"offline."}),
    "icarl": ({"kind": "icarl", "memory_size": 40}, set()),  # the memory's chunk of a step follows from the step
    # each block's per-expert choice counts over the task's steps (its 2 top experts are frozen at the end)
    "moe-adapters": ({"kind": "moe_adapters", "experts": 4, "bottleneck": 8, "ae_iterations": 6}, {".counts"}),
    # modules attached beside the frozen backbone: their parameters checkpoint as the model's; the teacher,
    # earlier branches and K-means centroids are rebuilt from task 1's stored state and the job's generator
    "cl-lora": ({"kind": "cl_lora"}, set()),
    "sprompts": ({"kind": "sprompts"}, set()),
    "l2p": ({"kind": "l2p", "pool_size": 4, "length": 2, "top_k": 2, "vote_group": 4}, set()),
    "diki": ({"kind": "diki", "vision_depth": 2, "text_depth": 1, "vision_length": 2, "text_length": 2}, set()),
}
FULL = {"zscl", "ewc", "gem", "lwf", "icarl"}  # full fine-tuning: the tiny config's full-ft learning rate


@pytest.fixture
def resume_run(tiny_run):
    tiny_run["method_configs"].update(
        {name: {**spec, **({"train": {"lr": 0.0005}} if name in FULL else {})} for name, (spec, _) in METHODS.items()}
    )
    tiny_run["data"]["reference"] = {"kind": "mini-corpus", "size": 48}
    return tiny_run


def stored(cfg, method, task):
    folder = task_dir(cfg, method, 0, task)
    state = folder / METHOD_STATE_FILE
    history = [
        {k: v for k, v in json.loads(line).items() if k != "_time"}
        for line in (folder / HISTORY_FILE).read_text().splitlines()
    ]
    return load_file(str(folder / UPDATE_FILE)), (load_file(str(state)) if state.is_file() else {}), history


class Killed(Exception):
    pass


def test_every_kind_with_mid_task_state_is_resumed_here():
    keeping = {k for k in available_kinds() if method_class(k).checkpoint_state is not Method.checkpoint_state}
    assert keeping - {spec["kind"] for spec, _ in METHODS.values()} == set()


def kill_after_5(step):
    if step == 5:
        raise Killed


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(METHODS))
def test_killed_job_resumes_bit_identically(resume_run, tmp_path, method):
    train_task(resume_run, method, 0, 1)
    with pytest.raises(Killed):
        train_task(resume_run, method, 0, 2, on_step=kill_after_5)
    checkpoint = find_checkpoint(task_checkpoint_dir(resume_run, method, 0, 2))
    assert json.loads((checkpoint / "state.json").read_text())["step"] == 4
    saved = load_method_checkpoint(checkpoint)
    for key in METHODS[method][1]:
        assert any(key in k for k in saved), (key, sorted(saved)[:5])
    torch.manual_seed(12345)  # a fresh process: nothing may depend on the killed run's RNG
    train_task(resume_run, method, 0, 2)
    resumed = stored(resume_run, method, 2)

    fresh = {**resume_run, "results": str(tmp_path / "fresh")}
    shutil.copytree(task_dir(resume_run, method, 0, 1), task_dir(fresh, method, 0, 1))  # the same task 1
    train_task(fresh, method, 0, 2)
    uninterrupted = stored(fresh, method, 2)
    for a, b in zip(resumed[:2], uninterrupted[:2], strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), k
    assert resumed[2] == uninterrupted[2]  # the step metrics too (budget, sampled rank, losses)
