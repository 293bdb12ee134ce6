"""The paper's published numbers (codyra/analysis/published.yaml) and the comparison with ours."""

from __future__ import annotations

import numpy as np
import pytest

from codyra.analysis.compare import comparison_table, kendall, paper_name
from codyra.analysis.published import mean_std, published, value
from codyra.config import load_config
from codyra.tables import Table, write_table

LLAMA2 = "meta-llama / LLaMA-2-7B-Chat"


def test_hand_read_values_of_the_paper():
    assert value("few_mtil", "CoDyRA", "Average", "Last") == 78.0  # Table 1, Last, Average column
    assert value("few_mtil", "ZSCL", "Aircraft", "Average") == 28.2
    assert value("few_mtil", "CoDyRA", "Aircraft", "Transfer") is None  # "--"
    assert value("llm_cl", "OP", "CoDyRA", LLAMA2) == [43.82, 0.9]  # Table 2
    assert value("llm_cl", "Forgetting", "SeqLoRA", "google / Gemma-2B-it") == [15.28, 0.4]
    assert value("llm_cl", "Forgetting", "FIX(ICL)", LLAMA2) is None
    assert value("drift", "LoRA (r=16)", "10") == 50.11 and value("drift", "CoDyRA", "1") == 3.13
    assert value("supp_norm_stability", "CoDyRA", "||B||_2") == 0.348
    assert value("few_xtail", "LoRA (r=4)", "Aircraft", "Last") == 9.75
    assert value("supp_cka", "Mean", "LoRA (r=16)") == 0.0094
    assert value("supp_interp", "0.25", "Unseen zero-shot (avg.)") == 56.21
    assert value("supp_dtd", "vision", "Fgt r16") == [18.43, 1.09]
    assert value("full_mtil", "CoDyRA", "Average", "Last") == 84.9
    assert value("comp_cost", "CoDyRA", "Train. Params.") == "4.4M"
    with pytest.raises(KeyError, match="no table"):
        value("table99", "x", "y")


def test_every_row_has_one_value_per_column():
    for label, t in published().items():
        for row in t["rows"]:
            assert len(row["values"]) == len(t["columns"]), (label, row["row"])


# The paper's own slips: rows whose printed Average is not the mean of the printed values
# (rounding, or a typo in the paper). Listed so that a transcription error elsewhere fails.
PAPER_SLIPS = {
    ("few_mtil", "Last", "WiSE-FT"),
    ("few_xtail", "Average", "LAE-LoRA"),
    ("full_mtil", "CLIP zero-shot reference", "Zero-shot"),
    ("full_mtil", "Transfer", "L2P†"),
    ("full_mtil", "Transfer", "DualPrompt†"),
    ("full_mtil", "Transfer", "ZSCL"),
}


def test_each_average_column_is_the_mean_of_its_row():
    slips = set()
    for label in ("few_mtil", "few_xtail", "full_mtil"):
        for row in published()[label]["rows"]:
            values = [v for v in row["values"][:-1] if v is not None]
            if abs(np.mean(values) - row["values"][-1]) > 0.06:
                slips.add((label, row["block"], row["row"]))
    assert slips == PAPER_SLIPS


def test_mean_std_of_cells():
    assert mean_std([1.5, 0.2]) == (1.5, 0.2) and mean_std(3.0) == (3.0, None) and mean_std(None) is None and mean_std("4.4M") is None


def test_kendall_counts_concordant_pairs():
    assert kendall([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])[:2] == (3, 3)
    concordant, pairs, tau = kendall([1.0, 2.0, 3.0], [30.0, 20.0, 10.0])
    assert (concordant, pairs, tau) == (0, 3, pytest.approx(-1.0))


def _csv_table(out, name, block, rows: dict[str, list[float]], column):
    table = Table(name, name, [column])
    for method, values in rows.items():
        table.rows.append((block, method, [values]))
    write_table(out, table)


def test_paper_benchmark_comparison_flags_differences_beyond_the_spread(tiny_cfg, tmp_path):
    cfg = {**tiny_cfg, "benchmark": "trace-llama-2-7b-chat", "data": {**tiny_cfg["data"], "kind": "trace"}, "model": {**tiny_cfg["model"], "pretrained": "x"}}
    cfg["methods"] = ["codyra", "lora-r4"]
    table = Table("table2", "t2", ["codyra", "lora-r4"])
    table.rows.append(("", "OP", [[43.0, 44.0, 45.0], [30.0, 31.0, 32.0]]))  # codyra 44 ± 1 vs 43.82 ± 0.9: ok
    table.rows.append(("", "Forgetting", [[10.0, 10.0, 10.0], [5.0, 5.0, 5.0]]))  # 10 vs 3.25 ± 0.5: differs
    write_table(tmp_path, table)
    out = comparison_table(cfg, tmp_path)
    rows = {(r[0], r[1]): r for r in out.rows}
    assert set(rows) == {("OP", "codyra"), ("Forgetting", "codyra")}  # LoRA (r=4) is not in TRACE's table
    assert rows["OP", "codyra"][4:] == ["43.82 ± 0.90", "44.00 ± 1.00", "+0.18", "ok"]
    assert rows["Forgetting", "codyra"][6:] == ["+6.75", "DIFFERS"]


def test_mini_comparison_is_the_order_of_methods(tiny_cfg, tmp_path):
    _csv_table(tmp_path, "table1", "Last", {"codyra": [50.0, 52.0], "lora-r4": [40.0, 41.0], "zeroshot": [30.0, 30.0]}, "Average")
    out = comparison_table(tiny_cfg, tmp_path)  # the mini benchmark pretrains its own theta_0
    last = next(r for r in out.rows if r[0] == "Last")
    # few_xtail Last: CoDyRA 79.2 > LoRA (r=4) 58.0; zero-shot has no Last there
    assert last[2:] == ["codyra > lora-r4", "codyra > lora-r4", "1/1", "1.00"]
    assert paper_name(tiny_cfg, "lora-r4") == "LoRA (r=4)" and paper_name(tiny_cfg, "full-ft") is None
    swept = load_config({**tiny_cfg, "ablations": {"k": {"method": "codyra", "vary": {"kappa_max": [0.1]}}}})
    assert paper_name(swept, "codyra-kappa_max-0.1") is None  # a variant is not the paper's CoDyRA


def test_mtil_comparison_covers_each_dataset_column(tiny_cfg, tmp_path):
    cfg = {**tiny_cfg, "data": {**tiny_cfg["data"], "kind": "mtil", "fewshot": 5}, "tasks": [{"name": "Aircraft"}, {"name": "StanfordCars"}], "methods": ["codyra"]}
    table = Table("table1", "t1", ["Aircraft", "StanfordCars", "Average"])
    table.rows.append(("Last", "codyra", [[31.0, 32.0], [70.0, 71.0], [50.0, 51.0]]))
    write_table(tmp_path, table)
    rows = {r[0]: r for r in comparison_table(cfg, tmp_path).rows}
    assert set(rows) == {"Last / Aircraft", "Last / StanfordCars", "Last"}  # Table 1 (few_mtil), Cars = StanfordCars
    assert rows["Last / StanfordCars"][4:7] == ["73.60", "70.50 ± 0.71", "-3.10"]
    assert rows["Last"][4] == "78.00" and rows["Last"][7] == "DIFFERS"
