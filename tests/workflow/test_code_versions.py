"""Code versions on a finished grid: an edit reruns exactly the jobs whose output the edited code
determines (codyra.experiment.codeversions). Each test dry-runs the finished tiny grid with a
copy of the package in which some modules are edited."""

from __future__ import annotations

import copy
import os
import re
import shutil

import pytest

from .conftest import REPO, job_counts, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def copied_package(finished_grid, tmp_path_factory):
    """A copy of the package that the finished grid, dry-run with it, finds up to date."""
    workdir, cfg, _ = finished_grid
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(REPO / "src" / "codyra", src / "codyra", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(src)}
    assert job_counts(snakemake(workdir, cfg, "-n", "all_tables", env=env).stdout) == {}  # same code: up to date
    return src / "codyra", env


@pytest.fixture
def edit_and_plan(finished_grid, copied_package):
    """``plan(*edits)``: the jobs a dry run plans (count per rule, methods) once each edit ``(module
    path, old, new)`` (old None: append new) is made in the copy of the package; the copy is
    restored after the test."""
    workdir, cfg, _ = finished_grid
    package, env = copied_package
    originals: dict = {}

    def plan(*edits: tuple[str, str | None, str]) -> tuple[dict[str, int], set[str]]:
        for path, old, new in edits:
            file = package / path
            text = file.read_text() if file.exists() else None
            originals.setdefault(file, text)
            text = text or ""
            assert old is None or old in text, f"{old!r} not in {path}"
            file.write_text(text + new if old is None else text.replace(old, new, 1))
        out = snakemake(workdir, cfg, "-n", "all_tables", env=env).stdout
        return job_counts(out), set(re.findall(r"wildcards: method=([\w-]+)", out))

    yield cfg, plan
    for file, text in originals.items():
        if text is None:
            file.unlink()
        else:
            file.write_text(text)


def appended(path: str, text: str) -> tuple[str, None, str]:
    return path, None, text  # a new module if there is none


def test_comments_docstrings_and_tracking_code_rerun_nothing(edit_and_plan):
    _, plan = edit_and_plan
    unused = "\nUNUSED = 1\n"  # code that changes no result: the MLflow mirror and sync, logs and progress bars
    assert plan(
        appended("tracking/mirror.py", "\n# the MLflow mirror, commented\n"),
        appended("methods/codyra.py", "\n# a method of the grid, commented\n"),
        ("methods/codyra.py", '"""CoDyRA: ', '"""CoDyRA, its docstring edited: '),
        ("training/loop.py", "\n\n", "\n\n\n"),  # layout
        *(appended(path, unused) for path in ("tracking/mirror.py", "tracking/sync.py", "progress.py")),
    ) == ({}, set())


@pytest.mark.parametrize("edited, method", [("methods/lora.py", "codyra"), ("methods/full.py", "full-ft")])
def test_a_method_edit_reruns_only_the_methods_built_on_it(edit_and_plan, edited, method):
    """CoDyRA's class extends LoRA's (methods/lora.py, a kind outside the grid); full-ft's is in methods/full.py."""
    cfg, plan = edit_and_plan
    n, seeds = len(cfg["tasks"]), len(cfg["seeds"])
    counts, methods = plan(appended(edited, "\nEDITED = 1\n"))
    assert methods == {method}  # no other method's jobs
    assert counts == {
        "train_task": seeds * n,
        "eval_row": seeds * n,
        "summarize_run": seeds,
        "tables": 1,
        "all_tables": 1,
    }


def test_a_new_unconfigured_method_module_reruns_nothing(edit_and_plan):
    new = "from codyra.methods.lwf import LwF\n\n\nclass Rehearsal(LwF):\n    pass\n\n\nMETHOD = Rehearsal\n"
    _, plan = edit_and_plan
    assert plan(appended("methods/rehearsal.py", new)) == ({}, set())


def test_a_shared_loop_edit_reruns_every_training_and_a_tables_edit_the_tables(edit_and_plan):
    cfg, plan = edit_and_plan
    assert plan(appended("evaluation/tables.py", "\nEDITED = 1\n")) == ({"tables": 1, "all_tables": 1}, set())
    counts, methods = plan(appended("training/loop.py", "\nEDITED = 1\n"))
    assert {"codyra", "full-ft"} <= methods
    n, seeds, trained = len(cfg["tasks"]), len(cfg["seeds"]), len(cfg["methods"]) - 1  # zeroshot trains nothing
    assert counts["train_task"] == counts["eval_row"] == trained * seeds * n
    assert not {"pretrain_mini", "eval_row0"} & counts.keys()  # theta_0 and its row run no training code


def test_a_plugin_method_added_to_a_finished_grid_runs_only_its_own_jobs(finished_grid, tmp_path):
    """A method kind of another distribution (examples/codyra-mylora, installed offline): its jobs
    are planned, no other method's (its code version is its own)."""
    from tests.methods.test_method_plugins import copied_example, install

    workdir, cfg, _ = finished_grid
    site = install(copied_example(tmp_path), tmp_path / "site")
    grown = copy.deepcopy(cfg)
    grown["methods"].append("rs-lora")
    grown["method_configs"]["rs-lora"] = {"kind": "mylora", "rank": 4}
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = snakemake(workdir, grown, "-n", "all_tables", env=env).stdout
    n, seeds = len(cfg["tasks"]), len(cfg["seeds"])
    assert set(re.findall(r"wildcards: method=([\w-]+)", out)) == {"rs-lora"}
    counts = job_counts(out)
    assert counts["train_task"] == seeds * n and counts["summarize_run"] == seeds
