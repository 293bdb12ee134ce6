"""`codyra data check` on a TRACE config: every task folder's three split files, as the reader reads them."""

from __future__ import annotations

import json

import pytest
import yaml

from codyra.cli import main
from codyra.experiment.config import load_config

from .test_rehearsal_datasets import CONFIG_DIR, paper_config


@pytest.fixture
def trace_config(tmp_path):
    """config/trace.yaml with its data.root at a fixture of its 8 task folders."""
    from codyra.rehearsal.datasets import write_datasets

    root = tmp_path / "TRACE"
    write_datasets(paper_config("trace.yaml", root, tmp_path / "results"), root, train_per_class=3)
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump({"extends": str(CONFIG_DIR / "trace.yaml"), "data": {"root": str(root)}}))
    return path, root


def rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line and line.split()[0] in TASKS}


TASKS = ("C-STANCE", "FOMC", "MeetingBank", "Py150", "ScienceQA", "NumGLUE-cm", "NumGLUE-ds", "20Minuten")


def test_trace_check_counts_each_task_s_examples(trace_config, capsys):
    path, root = trace_config
    assert main(["data", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"TRACE task folders, data root {root}" in out
    assert rows(out) == {task: ["ok", "3", "2", "2"] for task in TASKS}
    assert "8 of 8 tasks usable" in out


def test_trace_check_names_each_broken_file_and_record(trace_config, capsys):
    path, root = trace_config
    fomc = json.loads((root / "FOMC" / "test.json").read_text())
    del fomc[1]["answer"]
    (root / "FOMC" / "test.json").write_text(json.dumps(fomc))
    (root / "Py150" / "eval.json").write_text("[{")
    (root / "ScienceQA" / "train.json").unlink()
    for split in ("train", "eval", "test"):
        (root / "20Minuten" / f"{split}.json").unlink()
    (root / "20Minuten").rmdir()

    assert main(["data", "check", "--config", str(path)]) == 1
    out = capsys.readouterr().out
    found = rows(out)
    assert found["FOMC"] == ["incomplete", "3", "2", "-"]
    assert found["Py150"] == ["incomplete", "3", "-", "2"]
    assert found["ScienceQA"] == ["incomplete", "-", "2", "2"]
    assert found["20Minuten"] == ["missing", "-", "-", "-"]
    assert found["C-STANCE"] == ["ok", "3", "2", "2"]
    assert f"{root}/FOMC/test.json: record 1 has no 'answer' key" in out
    assert f"{root}/Py150/eval.json: invalid JSON at line 1" in out
    assert f"{root}/ScienceQA/train.json: file not found" in out
    assert f"expected the folder {root}/20Minuten with train, eval, test (.json)" in out
    assert "4 of 8 tasks usable" in out


def test_the_mini_trace_has_nothing_to_check(capsys):
    assert main(["data", "check", "--config", "config/mini_trace.yaml"]) == 2
    assert "not 'trace' (the mini TRACE: the workflow writes its data)" in capsys.readouterr().err


def test_a_trace_config_checks_its_own_tasks(tmp_path):
    from codyra.data.check import check_config

    root = tmp_path / "TRACE"
    cfg = paper_config("trace.yaml", root, tmp_path / "results")
    cfg["tasks"] = cfg["tasks"][:2]
    root.mkdir()
    problems = check_config(load_config(cfg))
    assert [p.split(":")[0] for p in problems] == ["TRACE task 'C-STANCE' is missing", "TRACE task 'FOMC' is missing"]
