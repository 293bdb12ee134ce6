"""The paper's published numbers (codyra/analysis/published.yaml) and the comparison with ours."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from codyra.analysis.compare import comparison_table
from codyra.analysis.paper_metrics import COMPARED, NO_NUMBER, NO_ROW, NOT_RUN, kendall, paper_row
from codyra.analysis.published import benchmarks, inconsistency, mean_std, published, tables_of, value
from codyra.evaluation.table_formats import Table, write_table
from codyra.experiment.config import load_config
from codyra.methods import available_kinds

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
    assert (
        mean_std([1.5, 0.2]) == (1.5, 0.2)
        and mean_std(3.0) == (3.0, None)
        and mean_std(None) is None
        and mean_std("4.4M") is None
    )


def test_kendall_counts_concordant_pairs():
    assert kendall([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])[:2] == (3, 3)
    concordant, pairs, tau = kendall([1.0, 2.0, 3.0], [30.0, 20.0, 10.0])
    assert (concordant, pairs, tau) == (0, 3, pytest.approx(-1.0))


# our Table 1, forgetting and TRACE tables label methods by display name (codyra.evaluation.tables.row_labels)
LABELS = {
    "zeroshot": "Zero-shot",
    "codyra": "CoDyRA",
    "lwf": "LwF",
    "codyra-dagger†": "CoDyRA†",
    "rail-dual†": "RAIL-Dual†",
    "moe-adapters†": "MoE-Adapter†",
    "full-ft": "Full FT",
    "olora": "O-LoRA",
    "inflora": "InfLoRA",
    "zscl": "ZSCL",
    "lora-r4": "LoRA (r=4)",
}


def _write(out, name, cells: dict[tuple[str, str, str], list[float]]):
    """Our table ``name`` (as codyra.evaluation.tables writes it) with per-seed values of (block, row, column) cells,
    a method's row under its display name in the tables that label methods so."""
    if name in ("table1", "forgetting"):
        cells = {(b, LABELS.get(r, r), c): v for (b, r, c), v in cells.items()}
    columns = list(dict.fromkeys(c for _, _, c in cells))
    table = Table(name, name, columns)
    for block, row in dict.fromkeys((b, r) for b, r, _ in cells):
        table.rows.append((block, row, [cells.get((block, row, c)) for c in columns]))
    write_table(out, table, "bench")


def _rows(out) -> dict[tuple[str, str], list[str]]:
    """(metric, method) -> [Status, Paper row, Paper table, Published, Ours, Difference, Flag, Note]."""
    return {(r[0], r[1]): r[2:] for r in out.rows}


XTAIL = ["Aircraft", "Caltech101", "DTD", "EuroSAT", "Flowers", "Food", "MNIST", "OxfordPet", "StanfordCars", "SUN397"]
MTIL = [
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
]
MTIL_ORDER2 = [
    "StanfordCars",
    "Food",
    "MNIST",
    "OxfordPet",
    "Flowers",
    "SUN397",
    "Aircraft",
    "Caltech101",
    "DTD",
    "EuroSAT",
    "CIFAR100",
]
SPECS = {
    "lwf": {"kind": "lwf"},
    "codyra-dagger": {"kind": "codyra_dagger", "rank": 4},
    "rail-dual": {"kind": "rail", "variant": "dual"},
    "moe-adapters": {"kind": "moe_adapters"},
    "lora-r16": {"kind": "lora", "rank": 16},
    "olora": {"kind": "olora", "rank": 4},
    "inflora": {"kind": "inflora", "rank": 4},
    "zscl": {"kind": "zscl"},
    "icl": {"kind": "icl"},
}


def _paper_cfg(tiny_cfg, kind, fewshot, tasks, methods, **extra):
    """tiny_cfg as a paper benchmark (the paper's pretrained model, not the mini's own)."""
    return {
        **tiny_cfg,
        "data": {**tiny_cfg["data"], "kind": kind, "fewshot": fewshot},
        "model": {**tiny_cfg["model"], "pretrained": "x"},
        "tasks": list(tasks),
        "methods": methods,
        "method_configs": {**tiny_cfg["method_configs"], **SPECS},
        **extra,
    }


def test_every_method_kind_declares_its_published_row():
    names = set()  # every row, column and alias of the paper's tables
    for t in published().values():
        names |= {r["row"] for r in t["rows"]} | set(t["columns"]) | set(t.get("aliases", {}))
    cfg = {"analysis": {}, "ablations": {}, "method_configs": {f"m-{k}": {"kind": k} for k in available_kinds()}}
    cfg["method_configs"] |= {
        "rail-primal": {"kind": "rail", "variant": "primal"},
        "rail-dual": {"kind": "rail", "variant": "dual"},
    }
    cfg["method_configs"] |= {
        "codyra-rail-dual": {"kind": "codyra_rail", "variant": "dual"},
        "lora-r4": {"kind": "lora", "rank": 4},
    }
    rows = {m: paper_row(cfg, m)[0] for m in cfg["method_configs"]}
    assert {
        m: r for m, r in rows.items() if r is not None and r not in names
    } == {}  # each declared row is printed in the paper
    assert rows["m-wise_ft"] == "WiSE-FT" and rows["m-lwf_vr"] == "LwF-VR" and rows["m-icl"] == "FIX(ICL)"
    assert rows["m-moe_adapters"] == "MoE-Adapter†" and rows["m-codyra_dagger"] == "CoDyRA†"
    assert (
        rows["rail-primal"] == "RAIL-Primal†"
        and rows["rail-dual"] == "RAIL-Dual†"
        and rows["codyra-rail-dual"] == "CoDyRA + RAIL-Dual"
    )
    assert rows["lora-r4"] == "LoRA (r=4)" and rows["m-lora"] == "LoRA (r=16)"
    assert rows["m-full"] is None and rows["m-sora"] is None


def test_a_kind_without_a_declared_row_is_listed_not_dropped(tiny_cfg, monkeypatch):
    from codyra.analysis import paper_metrics
    from codyra.methods.lora import LoRA

    class Undeclared(LoRA):  # a new method kind that forgot its paper_row
        kind = "lora"

    monkeypatch.setattr(paper_metrics, "method_class", lambda kind: Undeclared)
    assert paper_row(tiny_cfg, "lora-r4") == (None, "method kind lora declares no paper_row (codyra.methods.lora)")


def test_the_papers_inconsistencies_are_marked():
    marked = set()
    for label, t in published().items():
        for r in t["rows"]:
            for column in t["columns"]:
                if inconsistency(label, r["row"], column, r["block"]):
                    marked.add((label, r["block"], r["row"], column))

    def whole(label, block, row):
        return {(label, block, row, c) for c in published()[label]["columns"]}

    assert marked == (
        {("few_mtil", "CLIP zero-shot reference", "Zero-shot", "Average"),
         ("full_mtil", "CLIP zero-shot reference", "Zero-shot", "Average")}
        | whole("full_mtil", "Transfer", "ZSCL") | whole("full_mtil", "Transfer", "L2P†")
        | whole("few_xtail", "Last", "LwF") | whole("few_xtail", "Last", "iCaRL")
    )  # fmt: skip
    rows = {
        (label, r["block"], r["row"]): r["values"]
        for label in ("few_mtil", "full_mtil", "few_xtail")
        for r in published()[label]["rows"]
    }
    assert rows["full_mtil", "Transfer", "ZSCL"] == rows["full_mtil", "Transfer", "L2P†"]
    assert rows["few_xtail", "Last", "LwF"] == rows["few_xtail", "Last", "iCaRL"]
    assert (
        rows["few_mtil", "CLIP zero-shot reference", "Zero-shot"][-1],
        rows["full_mtil", "CLIP zero-shot reference", "Zero-shot"][-1],
    ) == (65.3, 65.2)


def test_each_table_belongs_to_a_benchmark_of_the_paper():
    assert all(t["benchmark"] is None or t["benchmark"] in benchmarks() for t in published().values())
    assert tables_of("mtil-5shot") == [
        "few_mtil",
        "supp_olora_treelora",
    ]  # no forgetting, drift, CKA or held-out table for MTIL
    assert tables_of("mtil-full") == ["full_mtil"]
    assert {"bwt_main", "drift", "norm_lowest", "supp_cka", "unseen_transfer", "few_xtail"} <= set(
        tables_of("xtail-16shot")
    )
    assert benchmarks()["xtail-16shot"]["tasks"] == [{"StanfordCars": "Cars"}.get(t, t) for t in XTAIL]


def test_xtail_comparison_lists_every_method_with_its_status(tiny_cfg, tmp_path):
    methods = ["zeroshot", "codyra", "lwf", "codyra-dagger", "rail-dual", "moe-adapters", "full-ft", "lora-r16"]
    cfg = _paper_cfg(tiny_cfg, "xtail", 16, XTAIL, methods, heldout_tasks=["CIFAR100", "Places365", "ImageNet"])
    _write(tmp_path, "table1", {
        ("Last", "zeroshot", "Average"): [58.0, 59.0], ("Last", "codyra", "Average"): [79.0, 79.4],
        ("Last", "lwf", "Average"): [60.0, 60.0],
        ("Last", "codyra-dagger†", "Average"): [80.0, 81.0],
        ("Last", "codyra-dagger", "Average"): [10.0, 10.0],  # the bare name is not the row
        ("Last", "rail-dual†", "Average"): [82.0, 83.0], ("Last", "full-ft", "Average"): [50.0, 50.0],
        ("Last", "codyra", "Aircraft"): [37.0, 38.0],
    })  # fmt: skip
    _write(
        tmp_path,
        "forgetting",
        {
            ("", "codyra", "Forgetting"): [2.0, 2.0],
            ("", "moe-adapters†", "Forgetting"): [5.0, 6.0],
            ("", "rail-dual†", "Forgetting"): [1.0, 1.0],
        },
    )
    _write(
        tmp_path,
        "drift",
        {("", "codyra", f"{t + 1}: {name}"): [3.0 + t / 2, 3.0 + t / 2] for t, name in enumerate(XTAIL)}
        | {("", "codyra", "10: SUN397"): [7.5, 7.52]},
    )
    _write(tmp_path, "cka", {("", "codyra", "Mean"): [0.004, 0.004], ("", "lora-r16", "Mean"): [0.009, 0.0094]})
    _write(
        tmp_path,
        "general_capability",
        {
            ("", "codyra", "Average"): [58.0, 58.0],
            ("", "rail-dual", "Average"): [56.24, 56.24],
            ("", "codyra", "ImageNet"): [68.0, 69.0],
        },
    )
    rows = _rows(comparison_table(cfg, tmp_path))
    assert {m for metric, m in rows if metric == "Last"} == set(methods)  # every configured method, each with a status
    assert rows["Last", "codyra-dagger"][:6] == [
        COMPARED,
        "CoDyRA†",
        "codyra.tex line 708, label tab:few_xtail",
        "80.90",
        "80.50 ± 0.71",
        "-0.40",
    ]
    assert rows["Last", "codyra"][1:7] == [
        "CoDyRA",
        "codyra.tex line 820, label tab:supp_training_stability",
        "79.20 ± 0.18",
        "79.20 ± 0.28",
        "+0.00",
        "ok",
    ]
    assert rows["Last", "zeroshot"][3:7] == [
        "58.50",
        "58.50 ± 0.71",
        "+0.00",
        "ok",
    ]  # a zero-shot model's Last: the zero-shot reference row
    assert rows["Last", "lwf"][3:6] == ["64.00", "60.00 ± 0.00", "-4.00"]
    assert rows["Last", "lwf"][6] == "paper inconsistent" and "iCaRL" in rows["Last", "lwf"][7]
    assert rows["Last", "rail-dual"][:4] == [
        COMPARED,
        "RAIL-Dual",
        "codyra.tex line 990, label tab:supp_ours+rail",
        "82.40",
    ]
    assert rows["Last", "full-ft"][0] == NO_ROW and rows["Last", "full-ft"][4] == "50.00 ± 0.00"
    assert rows["Last", "lora-r16"][:4] == [NOT_RUN, "LoRA (r=16)", "codyra.tex line 708, label tab:few_xtail", "59.40"]
    assert rows["Last", "moe-adapters"][0] == NOT_RUN
    assert rows["Last / Aircraft", "codyra"][3:5] == ["37.70 ± 0.42", "37.50 ± 0.71"]
    assert ("Last / Aircraft", "lwf") not in rows  # a per-task row only where compared
    assert rows["Forgetting", "codyra"][2:7] == [
        "codyra.tex line 366, label tab:bwt_main",
        "1.87",
        "2.00 ± 0.00",
        "+0.13",
        "DIFFERS",
    ]
    assert rows["Forgetting", "moe-adapters"][:5] == [
        COMPARED,
        "MoE-Ad.",
        "codyra.tex line 366, label tab:bwt_main",
        "5.43",
        "5.50 ± 0.71",
    ]
    assert (
        rows["Forgetting", "rail-dual"][0] == NO_NUMBER
        and rows["Forgetting", "rail-dual"][-1] == "no RAIL-Dual† number in bwt_main"
    )
    assert rows["Drift (last task)", "codyra"][3:6] == ["7.51", "7.51 ± 0.01", "+0.00"]
    assert rows["Drift after task 4", "codyra"][3:6] == ["4.71", "4.50 ± 0.00", "-0.21"]
    assert rows["Drift (last task)", "lora-r16"][0] == NOT_RUN and rows["Drift (last task)", "zeroshot"][0] == NO_NUMBER
    assert rows["CKA (mean)", "lora-r16"][3:6] == ["0.0094", "0.0092 ± 0.0003", "-0.0002"]
    assert rows["Held-out average", "codyra"][3:6] == ["58.00", "58.00 ± 0.00", "+0.00"]
    assert rows["Held-out average", "rail-dual"][1] == "RAIL†"  # unseen_transfer's RAIL† (no variant named)
    assert rows["Held-out / ImageNet", "codyra"][3:6] == ["68.52", "68.50 ± 0.71", "-0.02"]


def test_mtil_compares_with_its_own_tables_and_has_no_published_forgetting(tiny_cfg, tmp_path):
    cfg = _paper_cfg(tiny_cfg, "mtil", 5, MTIL, ["zeroshot", "codyra", "olora", "inflora"])
    _write(tmp_path, "table1", {
        ("Average", "zeroshot", "Average"): [65.3, 65.3], ("Last", "olora", "Average"): [75.0, 75.2],
        ("Last", "inflora", "Average"): [70.0, 70.0],
        ("Last", "codyra", "StanfordCars"): [70.0, 71.0],
    })  # fmt: skip
    _write(tmp_path, "forgetting", {("", "codyra", "Forgetting"): [1.9, 1.9]})
    rows = _rows(comparison_table(cfg, tmp_path))
    assert (
        rows["Forgetting", "codyra"][0] == NO_NUMBER and rows["Forgetting", "codyra"][4] == "1.90 ± 0.00"
    )  # not X-TAIL's 1.87
    assert rows["Forgetting", "codyra"][-1] == "no CoDyRA number in the tables of mtil-5shot"
    assert rows["Average", "zeroshot"][2:7] == [
        "codyra.tex line 232, label tab:few_mtil",
        "65.30",
        "65.30 ± 0.00",
        "+0.00",
        "paper inconsistent",
    ]
    assert "65.2" in rows["Average", "zeroshot"][7]
    assert rows["Last", "olora"][:5] == [
        COMPARED,
        "O-LoRA",
        "codyra.tex line 800, label tab:supp_olora_treelora",
        "75.10",
        "75.10 ± 0.14",
    ]
    assert rows["Last", "inflora"][0] == NO_NUMBER  # InfLoRA has X-TAIL numbers only
    assert rows["Drift (last task)", "codyra"][0] == NO_NUMBER  # the paper's drift is X-TAIL's
    assert rows["Last / StanfordCars", "codyra"][2:6] == [
        "codyra.tex line 232, label tab:few_mtil",
        "73.60",
        "70.50 ± 0.71",
        "-3.10",
    ]  # the paper's Cars


def test_mtil_order_two_has_no_published_numbers(tiny_cfg, tmp_path):
    cfg = _paper_cfg(tiny_cfg, "mtil", 5, MTIL_ORDER2, ["codyra", "full-ft"])
    _write(tmp_path, "table1", {("Last", "codyra", "Average"): [78.0, 78.0]})
    out = comparison_table(cfg, tmp_path)
    rows = _rows(out)
    assert {status for status, *_ in rows.values()} == {NO_NUMBER, NO_ROW}  # never order I's Table 1
    assert rows["Last", "codyra"][3:5] == ["n/a", "78.00 ± 0.00"]
    assert rows["Last", "codyra"][-1].startswith(
        "the paper's mtil-5shot numbers are for the task order Aircraft, Caltech101, CIFAR100"
    )
    assert any("this config trains Cars, Food, MNIST" in n for n in out.notes)


def test_full_shot_mtil_flags_zscl_transfer(tiny_cfg, tmp_path):
    cfg = _paper_cfg(tiny_cfg, "mtil", None, MTIL, ["zscl"])
    _write(tmp_path, "table1", {("Transfer", "zscl", "Average"): [68.0, 68.0]})
    row = _rows(comparison_table(cfg, tmp_path))["Transfer", "zscl"]
    assert row[2:7] == [
        "codyra.tex line 907, label supp:full_mtil",
        "53.20",
        "68.00 ± 0.00",
        "+14.80",
        "paper inconsistent",
    ]
    assert "L2P†" in row[7]


def test_trace_comparison_reads_the_backbones_block(tiny_cfg, tmp_path):
    cfg = _paper_cfg(tiny_cfg, "trace", None, benchmarks()["trace"]["tasks"], ["codyra", "icl", "lora-r4"])
    cfg["model"].update(family="causal_lm", name="google/gemma-2b-it")  # Table 2's backbones are causal LMs
    table = Table("table2", "t2", ["CoDyRA", "FIX(ICL)", "LoRA (r=4)"])
    table.rows.append(
        ("", "OP", [[33.0, 34.0, 35.0], [32.0, 32.3, 32.6], [30.0, 31.0, 32.0]])
    )  # codyra 34 ± 1 vs 33.96 ± 1.0: ok
    table.rows.append(
        ("", "Forgetting", [[10.0, 10.0, 10.0], [1.0, 1.0, 1.0], [5.0, 5.0, 5.0]])
    )  # 10 vs 7.94 ± 0.8: differs
    write_table(tmp_path, table, "bench")
    rows = _rows(comparison_table(cfg, tmp_path))
    assert rows["OP", "codyra"][3:7] == ["33.96 ± 1.00", "34.00 ± 1.00", "+0.04", "ok"]
    assert rows["Forgetting", "codyra"][5:7] == ["+2.06", "DIFFERS"]
    assert rows["OP", "icl"][:4] == [COMPARED, "FIX(ICL)", "codyra.tex line 312, label tab:llm_cl", "32.30 ± 0.20"]
    assert rows["Forgetting", "icl"][0] == NO_NUMBER  # "--" in the paper
    assert rows["OP", "lora-r4"][0] == NO_NUMBER  # LoRA (r=4) is not in TRACE's table
    cfg["model"]["name"] = "Qwen/Qwen2-0.5B"
    rows = _rows(comparison_table(cfg, tmp_path))
    assert rows["OP", "codyra"][0] == NO_NUMBER and "this config's model is Qwen/Qwen2-0.5B" in rows["OP", "codyra"][-1]


def test_mini_comparison_is_the_order_of_methods(tiny_cfg, tmp_path):
    _write(
        tmp_path,
        "table1",
        {
            ("Last", m, "Average"): v
            for m, v in {
                "codyra": [50.0, 52.0],
                "lora-r4": [40.0, 41.0],
                "zeroshot": [30.0, 30.0],
                "full-ft": [45.0, 45.0],
            }.items()
        },
    )
    out = comparison_table(tiny_cfg, tmp_path)  # the mini benchmark pretrains its own theta_0: X-TAIL's tables
    last = next(r for r in out.rows if r[0] == "Last")
    # X-TAIL Last: CoDyRA 79.2 > zero-shot 58.5 (its zero-shot reference) > LoRA (r=4) 58.0
    assert last[2:] == ["codyra > zeroshot > lora-r4", "codyra > lora-r4 > zeroshot", "2/3", "0.33"]
    assert "Last: no published row: full-ft" in out.notes
    assert paper_row(tiny_cfg, "lora-r4") == ("LoRA (r=4)", "") and paper_row(tiny_cfg, "full-ft")[0] is None
    swept = load_config({**tiny_cfg, "ablations": {"k": {"method": "codyra", "vary": {"kappa_max": [0.1]}}}})
    assert paper_row(swept, "codyra-kappa_max-0.1") == (None, "an ablation variant (the paper's rows are the defaults)")


def test_the_tables_mark_with_a_dagger_the_rows_the_paper_marks(tiny_cfg):
    from codyra.clip.family import CLIP
    from codyra.evaluation.tables import method_layout
    from codyra.llm.family import CAUSAL_LM
    from codyra.methods import method_classes
    from codyra.methods.l2p import METHOD as L2P

    cfg = copy.deepcopy(tiny_cfg)
    cfg["method_configs"] |= {
        "cl-lora": {"kind": "cl_lora"},
        "l2p": {"kind": "l2p"},
        "rail-primal": {"kind": "rail", "variant": "primal"},
    }
    labels = dict(method_layout(cfg, method_classes(cfg, ["codyra", "cl-lora", "l2p", "rail-primal"])).rows)
    # CL-LoRA routes each class to its task's branch, yet the paper prints it bare; L2P's CLIP row has one
    assert labels == {"codyra": "CoDyRA", "cl-lora": "CL-LoRA", "l2p": "L2P†", "rail-primal": "RAIL-Primal†"}
    assert L2P.daggered(CLIP) and not L2P.daggered(CAUSAL_LM)  # TRACE's table prints L2P, DualPrompt
