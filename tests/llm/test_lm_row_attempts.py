"""A TRACE row job that fails keeps its finished cells and their predictions (as a CLIP row's:
tests/reliability/test_row_attempts.py)."""

from __future__ import annotations

from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.llm import evaluate as lm_evaluate
from codyra.store.paths import cell_path
from tests.reliability.test_row_attempts import fail_then_retry, outputs, row_files


def test_a_trace_row_keeps_its_cells_and_their_predictions(tiny_trace, tiny_trace_dict, tmp_path, monkeypatch):
    cfg = tiny_trace
    train_task(cfg, "lora-qv", 0, 1)
    folder, calls = fail_then_retry(cfg, "lora-qv", 0, 1, monkeypatch, lm_evaluate, "evaluate_lm_cell")
    assert [args[2] for args in calls] == [2]  # evaluate_lm_cell(cfg, row, j): cell 1 was kept
    files = [p.name for p in row_files(folder, 1)]
    assert files == ["A_1_1.json", "A_1_1.predictions.jsonl", "A_1_2.json", "A_1_2.predictions.jsonl"]

    whole = load_config({**tiny_trace_dict, "results": str(tmp_path / "uninterrupted")})
    train_task(whole, "lora-qv", 0, 1)
    evaluate_row(whole, "lora-qv", 0, 1)
    assert outputs(row_files(folder, 1)) == outputs(row_files(cell_path(whole, "lora-qv", 0, 1, 1).parent, 1))
