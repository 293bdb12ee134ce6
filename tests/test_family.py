"""Family facts asked of the family object (rules, cluster unit, settings, cells, held-out tasks,
analyses) and the training loop run from outside a job: what it is handed is all it uses."""

from __future__ import annotations

import json

import pytest

import codyra.mini.clip.pretrain
import codyra.mini.trace.pretrain
from codyra import __version__
from codyra.analysis.registry import available, skipped
from codyra.evaluation.evaluate import evaluate_row0
from codyra.evaluation.heldout import evaluate_heldout
from codyra.experiment.fingerprints import train_fingerprint
from codyra.experiment.jobs import eval_rule, job_group, row_group, rule_for, train_rule
from codyra.experiment.pretraining import pretrain_own
from codyra.experiment.train_job import training_task
from codyra.family import family_of
from codyra.methods import build_method
from codyra.store.cells import read_cell
from codyra.store.io import ResultError
from codyra.store.paths import HISTORY_FILE, SUMMARY_FILE, row0_cell_path
from codyra.training.loop import fit

LLM_BLOCK = {"max_prompt_len": 64, "mini": None}


def family_cfg(family: str, **extra) -> dict:
    return {"model": {"family": family}, "llm": LLM_BLOCK, **extra}


def analysis_cfg(family: str) -> dict:
    """Two tasks, held-out tasks and one trained adapter method: every analysis a CLIP grid runs."""
    lora = {"kind": "lora", "rank": 4}
    return {
        "model": {"family": family},
        "tasks": ["a", "b"],
        "heldout_tasks": ["h"],
        "methods": ["lora"],
        "method_configs": {"lora": lora},
        "ablations": {},
    }


@pytest.mark.parametrize(
    ("family", "train", "evaluate", "group"),
    [
        ("clip", "train_task", "eval_row", "run-{method}-seed{seed}"),
        ("causal_lm", "train_lm_task", "eval_lm_row", "task-{method}-seed{seed}-{i}"),
    ],
)
def test_the_job_table_asks_the_family_for_its_rules_and_cluster_unit(family, train, evaluate, group):
    cfg = family_cfg(family)
    assert (train_rule(cfg), eval_rule(cfg), job_group(cfg)) == (train, evaluate, group)
    assert rule_for("run", "codyra", cfg) == train and rule_for("cell", "codyra", cfg) == evaluate
    assert (
        job_group({**cfg, "cluster_job": "task" if group.startswith("run") else "run"}) != group
    )  # the config key wins
    # a row joins its training's job, unless the family trains on more GPUs than a row uses
    assert row_group(cfg) == (group if family == "clip" else "row-{method}-seed{seed}-{i}")


def test_only_the_lm_family_adds_settings_to_the_fingerprints():
    assert family_of("clip").settings(family_cfg("clip")) == {}
    assert family_of("causal_lm").settings(family_cfg("causal_lm")) == {"llm": LLM_BLOCK}


def test_cells_count_classes_where_the_family_classifies(tmp_path):
    cfg = {"benchmark": "b", "tasks": ["t"]}
    cell = {"accuracy": 50.0, "benchmark": "b", "method": "m", "seed": 0, "i": 1, "j": 1, "task": "t"}
    path = tmp_path / "A_1_1.json"
    path.write_text(json.dumps(cell))
    assert family_of("clip").classifies and not family_of("causal_lm").classifies
    assert read_cell(cfg, path, "m", 0, 1, 1, classifies=False) == cell  # a TRACE cell: a metric, no classes
    with pytest.raises(ResultError, match="num_classes None is not a positive integer"):
        read_cell(cfg, path, "m", 0, 1, 1, classifies=True)


def test_held_out_tasks_need_a_family_that_has_them():
    cfg = {**family_cfg("causal_lm"), "heldout_tasks": ["h"], "tasks": ["t"], "method_configs": {}}
    with pytest.raises(ValueError, match=r"held-out evaluation applies to CLIP benchmarks \(model.family: clip\)"):
        evaluate_heldout(cfg, "pretrained", None, 0)


def test_the_probes_and_the_gradient_conflict_are_clip_analyses():
    clip, lm = analysis_cfg("clip"), analysis_cfg("causal_lm")
    assert {"probes", "conflict"} <= set(available(clip))
    assert not {"probes", "conflict"} & set(available(lm))
    assert {name: why for name, why in skipped(lm).items() if name in ("probes", "conflict")} == {
        "probes": (
            "the paper reports it for CLIP only "
            "(interpolation on unseen zero-shot data, removal of one encoder's updates)"
        ),
        "conflict": "the paper reports it for CLIP only (gradients at the pretrained CLIP, appendix supp_norm_matched)",
    }
    assert "probes" not in skipped(clip) and "conflict" not in skipped(clip)


def test_each_mini_benchmark_pretrains_its_own_theta0(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        codyra.mini.clip.pretrain, "pretrain_mini", lambda cfg, weights: calls.append(("clip", weights))
    )
    monkeypatch.setattr(
        codyra.mini.trace.pretrain, "pretrain_mini_lm", lambda cfg: calls.append(("trace", cfg["benchmark"]))
    )
    common = {"results": str(tmp_path), "benchmark": "b"}
    pretrain_own({**common, "model": {"family": "clip", "pretrained": None}, "data": {"kind": "mini"}})
    pretrain_own(
        {**common, "model": {"family": "causal_lm", "pretrained": None}, "data": {"kind": "trace"}, "llm": {"mini": {}}}
    )
    assert calls == [("clip", f"{tmp_path}/b/pretrain/model.safetensors"), ("trace", "b")]
    with pytest.raises(ValueError, match="pretrain-mini applies to the mini benchmarks"):
        pretrain_own({**common, "model": {"family": "clip", "pretrained": "openai"}, "data": {"kind": "mtil"}})


@pytest.mark.slow
def test_a_computed_cell_records_the_code_version(tiny_run):
    cell = evaluate_row0(tiny_run, 1)
    assert cell["codyra_version"] == __version__
    assert json.loads(row0_cell_path(tiny_run, 1).read_text())["codyra_version"] == __version__


class Recorded:
    """A metrics log that keeps what the loop reports."""

    def __init__(self):
        self.records = []

    def metrics(self, record: dict) -> None:
        self.records.append(record)


def test_the_loop_trains_from_what_the_job_hands_it(tiny_run):
    task = training_task(tiny_run, "lora-r4", 0, 1)
    run = Recorded()
    trained = fit(task, build_method(task.job["method"]), run, "cpu", None)
    total = trained.summary["steps"]
    assert total > 0 and [r["step"] for r in run.records] == list(range(1, total + 1))  # every step, to the given log
    written = json.loads((task.out / SUMMARY_FILE).read_text())
    assert written["settings"] == task.settings == train_fingerprint(tiny_run, "lora-r4", 1)
    assert written["previous_updates"] == [] and written["task_index"] == 1
    assert len((task.out / HISTORY_FILE).read_text().splitlines()) == total
    assert not task.checkpoints.exists()  # removed once the task is stored
