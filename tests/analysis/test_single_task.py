"""Single-task studies (config key single_task), zip sweeps, their metrics, and the per-module-type removal probe."""

from __future__ import annotations

import copy

import pytest
import torch

from codyra.analysis.single_task import delta_plasticity, forgetting, run_cells
from codyra.evaluation.table_formats import to_markdown
from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.single_task import study_runs
from codyra.experiment.sweeps import variants
from codyra.experiment.validation import single_task_config
from codyra.store.updates import TaskUpdate, apply_update


def study_cfg(cfg: dict, **study) -> dict:
    cfg["single_task"] = {"reference_tasks": ["shape"], "studies": {"probe": {"task": "hue", **study}}}
    return cfg


PLACEMENT_RANK = [
    {"method": "lora-r4", "vary": {"placement": ["attn", "mlp"]}, "zip": {"rank": [1, 2], "alpha": [1, 2]}}
]


def test_zip_varies_options_together_and_crosses_vary():
    out = variants(
        "s", {"method": "m", "vary": {"placement": ["attn", "mlp"]}, "zip": {"rank": [1, 8], "alpha": [2, 16]}}
    )
    assert out == [
        ("m-placement-attn-rank-1-alpha-2", {"placement": "attn", "rank": 1, "alpha": 2}),
        ("m-placement-attn-rank-8-alpha-16", {"placement": "attn", "rank": 8, "alpha": 16}),
        ("m-placement-mlp-rank-1-alpha-2", {"placement": "mlp", "rank": 1, "alpha": 2}),
        ("m-placement-mlp-rank-8-alpha-16", {"placement": "mlp", "rank": 8, "alpha": 16}),
    ]
    assert [n for n, _ in variants("s", {"method": "m", "zip": {"rank": [36, 29], "placement": ["attn", "mlp"]}})] == [
        "m-rank-36-placement-attn",
        "m-rank-29-placement-mlp",
    ]


def test_zip_errors_name_the_key(tiny_cfg_dict):
    tiny_cfg_dict["ablations"] = {"pm": {"method": "codyra", "zip": {"placement": ["attn", "mlp"], "rank": [36]}}}
    with pytest.raises(ConfigError, match=r"ablations.pm.zip: lists of unequal lengths \(placement: 2, rank: 1\)"):
        load_config(copy.deepcopy(tiny_cfg_dict))
    tiny_cfg_dict["ablations"] = {"pm": {"method": "codyra", "vary": {"rank": [2]}, "zip": {"rank": [4]}}}
    with pytest.raises(ConfigError, match="option.s. rank in both vary and zip"):
        load_config(copy.deepcopy(tiny_cfg_dict))
    tiny_cfg_dict["ablations"] = {"pm": {"method": "codyra"}}
    with pytest.raises(ConfigError, match="give vary .* and/or zip"):
        load_config(copy.deepcopy(tiny_cfg_dict))


def test_a_zip_sweep_expands_into_methods(tiny_cfg_dict):
    tiny_cfg_dict["ablations"] = {
        "pm": {
            "method": "codyra",
            "zip": {"placement": ["attn", "mlp"], "rank": [9, 7]},
            "table": "supp_placement_matched",
        }
    }
    cfg = load_config(tiny_cfg_dict)
    assert cfg["methods"][-2:] == ["codyra-placement-attn-rank-9", "codyra-placement-mlp-rank-7"]
    assert cfg["method_configs"]["codyra-placement-mlp-rank-7"] == {
        **cfg["method_configs"]["codyra"],
        "placement": "mlp",
        "rank": 7,
    }


def test_single_task_config_trains_one_task_from_the_benchmarks_theta_0(tiny_cfg_dict):
    cfg = load_config(study_cfg(tiny_cfg_dict, methods=["lora-r4"], sweeps=PLACEMENT_RANK))
    assert cfg["methods"] == ["zeroshot", "lora-r4", "codyra", "full-ft"]  # the stream's grid is untouched
    derived = single_task_config(cfg, "hue")
    assert derived["benchmark"] == "tiny-single-hue" and derived["tasks"] == ["hue"]
    assert derived["heldout_tasks"] == ["shape"] and derived["model"]["pretrained"].endswith(
        "tiny/pretrain/model.safetensors"
    )
    assert derived["methods"] == [
        "lora-r4",
        "lora-r4-placement-attn-rank-1-alpha-1",
        "lora-r4-placement-attn-rank-2-alpha-2",
        "lora-r4-placement-mlp-rank-1-alpha-1",
        "lora-r4-placement-mlp-rank-2-alpha-2",
    ]
    with_labels = study_cfg(
        copy.deepcopy(tiny_cfg_dict), sweeps=[{**PLACEMENT_RANK[0], "label": "{placement} r={rank}"}]
    )
    runs = study_runs(load_config(with_labels), "probe")
    assert [label for _, label in runs] == ["attn r=1", "attn r=2", "mlp r=1", "mlp r=2"]


@pytest.mark.parametrize(
    ("study", "reference", "message"),
    [
        ({"methods": ["lora-r4"]}, ["ImageNet"], r"reference_tasks\[0\]: 'ImageNet' is not a held-out dataset"),
        ({"methods": ["lora-r4"]}, [], "single_task.reference_tasks: empty"),
        ({"task": "shape", "methods": ["lora-r4"]}, ["shape"], "'shape' is a reference task"),
        ({"methods": ["nope"]}, ["shape"], "studies.probe.methods: 'nope' is not an entry of method_configs"),
        (
            {"sweeps": PLACEMENT_RANK, "pivot": {"rows": "placement", "columns": "kappa_max"}},
            ["shape"],
            "pivot.columns",
        ),
        (
            {"methods": ["lora-r4"], "remove_modules": [["vision", "qq"]]},
            ["shape"],
            r"remove_modules\[0\]: unknown placement",
        ),
        (
            {"sweeps": [{**PLACEMENT_RANK[0], "label": "r={ranks}"}]},
            ["shape"],
            r"sweeps\[0\].label: 'r=\{ranks\}' names ranks",
        ),
        ({"sweeps": [{**PLACEMENT_RANK[0], "table": "x"}]}, ["shape"], r"sweeps\[0\].table: a study's table"),
        ({"sweeps": [{"method": "lora-r4", "zip": {"rank": [1, 2], "alpha": [1]}}]}, ["shape"], "unequal lengths"),
    ],
)
def test_single_task_config_errors(tiny_cfg_dict, study, reference, message):
    cfg = study_cfg(tiny_cfg_dict, **study)
    cfg["single_task"]["reference_tasks"] = reference
    if "task" in study:
        cfg["single_task"]["studies"]["probe"]["task"] = study["task"]
    with pytest.raises(ConfigError, match=message):
        load_config(cfg)


def test_delta_plasticity_and_forgetting_as_the_paper_defines_them():
    # task: zero-shot 40.0, after training 71.5 -> gained 31.5
    assert delta_plasticity(40.0, 71.5) == pytest.approx(31.5)
    # references: (66 - 60) and (30 - 31) averaged -> 2.5 lost; a gain is negative forgetting
    assert forgetting({"ImageNet": 66.0, "Places365": 30.0}, {"ImageNet": 60.0, "Places365": 31.0}) == pytest.approx(
        2.5
    )
    record = {
        "task": [25.0, 50.0],
        "reference": [{"ImageNet": 66.72}, {"ImageNet": 64.22}],
        "summary": {"active_rank_mean": 4.0, "dW_fro_total": 3.8, "trainable_params": 100, "norm_target": 3.75},
    }
    assert run_cells(record) == pytest.approx(
        {
            "Delta-plasticity": 25.0,
            "Forgetting": 2.5,
            "eff. rank": 4.0,
            "Frobenius dW (task)": 3.8,
            "trainable params": 100,
            "target": 3.75,
        }
    )


class TinyClip(torch.nn.Module):
    """Parameters named as open_clip's: a vision attention (fused Q, K, V of width 2) and a text MLP."""

    def __init__(self):
        super().__init__()
        self.visual = torch.nn.Module()
        self.visual.attn = torch.nn.MultiheadAttention(2, 1)
        self.fc = torch.nn.Linear(2, 3, bias=False)
        for p in self.parameters():
            torch.nn.init.zeros_(p)


def tiny_update() -> TaskUpdate:
    """LoRA factors of the vision Q and V and the text FC: dW = B diag(w) A, computed by hand below."""
    targets = {
        "visual.transformer.resblocks.0.attn.q": {"param": "visual.attn.in_proj_weight", "rows": [0, 2]},
        "visual.transformer.resblocks.0.attn.v": {"param": "visual.attn.in_proj_weight", "rows": [4, 6]},
        "transformer.resblocks.0.mlp.c_fc": {"param": "fc.weight", "rows": None},
    }
    tensors = {}
    for name in targets:
        tensors[f"{name}.A"] = torch.tensor([[1.0, 2.0]])
        tensors[f"{name}.w"] = torch.tensor([2.0])
    tensors["visual.transformer.resblocks.0.attn.q.B"] = torch.tensor([[1.0], [0.0]])
    tensors["visual.transformer.resblocks.0.attn.v.B"] = torch.tensor([[0.0], [3.0]])
    tensors["transformer.resblocks.0.mlp.c_fc.B"] = torch.tensor([[1.0], [1.0], [1.0]])
    return TaskUpdate("lora", tensors, targets)


def merged(update: TaskUpdate) -> TinyClip:
    model = TinyClip()
    apply_update(model, update)
    return model


def test_removing_one_module_type_keeps_the_others():
    from codyra.analysis.probe_files import without_name
    from codyra.analysis.probes import without_modules

    q = [[2.0, 4.0], [0.0, 0.0]]  # B diag(w) A: [1, 0]^T * 2 * [1, 2]
    v = [[0.0, 0.0], [6.0, 12.0]]  # [0, 3]^T * 2 * [1, 2]
    fc = [[2.0, 4.0]] * 3
    zero = [[0.0, 0.0], [0.0, 0.0]]
    full = merged(tiny_update())
    assert full.visual.attn.in_proj_weight.tolist() == q + zero + v and full.fc.weight.tolist() == fc

    without_v = merged(without_modules(tiny_update(), ["vision", "v"]))
    assert without_v.visual.attn.in_proj_weight.tolist() == q + zero + zero and without_v.fc.weight.tolist() == fc
    without_attn = merged(without_modules(tiny_update(), ["vision", "attn"]))
    assert without_attn.visual.attn.in_proj_weight.tolist() == zero * 3 and without_attn.fc.weight.tolist() == fc
    without_text_mlp = merged(without_modules(tiny_update(), ["text", "mlp"]))
    assert without_text_mlp.fc.weight.tolist() == [[0.0, 0.0]] * 3
    assert without_text_mlp.visual.attn.in_proj_weight.tolist() == q + zero + v
    assert without_name(["vision", "v"]) == "without-vision_v"

    with pytest.raises(ValueError, match="selects no weight matrix"):
        without_modules(tiny_update(), ["text", "attn"])  # the update trained no text attention
    with pytest.raises(ValueError, match="low-rank modules"):
        without_modules(TaskUpdate("delta", {"fc.weight": torch.ones(3, 2)}), ["text", "fc"])


def record(zero_shot, after, ref_zero_shot, ref_after, **summary) -> dict:
    return {
        "task": [zero_shot, after],
        "reference": [{"shape": ref_zero_shot}, {"shape": ref_after}],
        "summary": summary,
    }


def test_study_tables_by_hand(tiny_cfg_dict, monkeypatch):
    from codyra.analysis import single_task as st

    tiny_cfg_dict["seeds"] = [0, 1]
    cfg = load_config(
        study_cfg(
            tiny_cfg_dict,
            sweeps=PLACEMENT_RANK,
            pivot={"rows": "placement", "columns": "rank"},
            remove_modules=[["vision", "v"]],
        )
    )
    options = single_task_config(cfg, "hue")["method_configs"]
    # two seeds per run: Delta-plasticity (after - zero-shot), Forgetting (reference zero-shot - after)
    runs = [
        st.Run(m, m, options[m], [record(20.0, 20.0 + dp, 60.0, 60.0 - f) for dp, f in values])
        for m, values in (
            ("lora-r4-placement-attn-rank-1-alpha-1", [(10.0, 1.0), (12.0, 3.0)]),
            ("lora-r4-placement-attn-rank-2-alpha-2", [(14.0, 2.0), (14.0, 2.0)]),
            ("lora-r4-placement-mlp-rank-1-alpha-1", [(9.0, -1.0), (11.0, -3.0)]),
            ("lora-r4-placement-mlp-rank-2-alpha-2", [(8.0, 4.0), (8.0, 6.0)]),
        )
    ]
    pivot = {label: stats for _, label, stats in st.pivot_table(cfg, "probe", runs).stats()}
    assert st.pivot_table(cfg, "probe", runs).columns == [
        "Delta-plasticity rank=1",
        "Delta-plasticity rank=2",
        "Forgetting rank=1",
        "Forgetting rank=2",
    ]
    assert [s[0] for s in pivot["attn"]] == pytest.approx([11.0, 14.0, 2.0, 2.0])
    assert [s[0] for s in pivot["mlp"]] == pytest.approx([10.0, 8.0, -2.0, 5.0])
    assert pivot["attn"][0][1] == pytest.approx(2**0.5)  # sample std of 10 and 12
    rows = {label: stats for _, label, stats in st.runs_table(cfg, "probe", runs, "probe_runs").stats()}
    assert rows["lora-r4-placement-mlp-rank-2-alpha-2"][1][0] == pytest.approx(5.0)
    assert rows["lora-r4-placement-mlp-rank-2-alpha-2"][2] is None  # no effective rank in these summaries

    # removal: theta_1 without the vision V modules scored 25 on the task and 59 on the reference
    probe = {"tasks": {"hue": 25.0}, "heldout": {"shape": 59.0}}
    monkeypatch.setattr("codyra.analysis.probes.read_probe", lambda *a: probe)
    removal = {(b, label): s for b, label, s in st.removal_table(cfg, "probe", {}, runs[:1]).stats()}
    without = removal[("lora-r4-placement-attn-rank-1-alpha-1", "without vision_v")]
    assert [s[0] for s in without] == pytest.approx([25.0, 59.0, 5.0, 1.0])
    full = removal[("lora-r4-placement-attn-rank-1-alpha-1", "all modules")]
    assert [s[0] for s in full] == pytest.approx([31.0, 58.0, 11.0, 2.0])


def test_norm_targets_missed_are_named(tiny_cfg_dict):
    from codyra.analysis import single_task as st

    cfg = load_config(study_cfg(tiny_cfg_dict, methods=["lora-r4"]))
    options = {"kind": "lora", "norm_target": 3.0, "norm_penalty": 1.0}
    runs = [
        st.Run("nm", "LoRA r=4", options, [record(0, 1, 1, 0, dW_fro_total=3.5, norm_target=3.0, task_index=1)]),
        st.Run("nm2", "LoRA r=8", options, [record(0, 1, 1, 0, dW_fro_total=3.1, norm_target=3.0, task_index=1)]),
    ]
    table = st.runs_table(cfg, "probe", runs, "probe")
    assert table.columns[-1] == "target" and "LoRA r=8" not in table.caption
    assert "Target missed by more than 10% (raise norm_penalty): LoRA r=4 seed 0" in table.caption
    assert "Learnt less" not in table.caption  # no natural run to compare with


def test_norm_matched_runs_that_learnt_next_to_nothing_are_named(tiny_cfg_dict):
    from codyra.analysis import single_task as st

    cfg = load_config(study_cfg(tiny_cfg_dict, methods=["lora-r4"]))
    matched = {"kind": "lora", "norm_target": 3.0, "norm_penalty": 1.0}
    on_target = {"dW_fro_total": 3.0, "norm_target": 3.0, "task_index": 1}
    runs = [  # natural runs gain 40 and 60 points: mean 50, so a matched run must gain 12.5 (25 %)
        st.Run("r1", "LoRA r=1 (natural)", {"kind": "lora"}, [record(20, 60, 1, 0)]),
        st.Run("r2", "LoRA r=2 (natural)", {"kind": "lora"}, [record(20, 80, 1, 0)]),
        st.Run("nm1", "LoRA r=1", matched, [record(20, 32, 1, 0, **on_target)]),  # gains 12: stalled
        st.Run("nm2", "LoRA r=2", matched, [record(20, 33, 1, 0, **on_target)]),  # gains 13
    ]
    caption = st.runs_table(cfg, "probe", runs, "probe").caption
    assert "Learnt less than 25% of the natural runs' Delta-plasticity (lower norm_penalty): LoRA r=1 seed 0" in caption
    assert "LoRA r=2 seed" not in caption and "Target missed" not in caption


def test_named_tables_are_compared_cell_by_cell(tmp_path):
    from codyra.analysis.named_tables import named_table_rows, named_tables
    from codyra.analysis.paper_metrics import COMPARED, NOT_RUN
    from codyra.experiment.config import read_config_file

    cfg = load_config(read_config_file("config/xtail_16shot.yaml"))
    assert named_tables(cfg) == [
        "supp_dtd",
        "supp_eurosat",
        "supp_flowers",
        "supp_norm_matched",
        "peft",
        "supp_placement_matched",
    ]
    header = "block,row,column,mean,std,n_seeds\n"
    for name in named_tables(cfg):
        (tmp_path / f"{name}.csv").write_text(header)
    (tmp_path / "supp_dtd.csv").write_text(header + ",attn,Delta-plasticity rank=4,31.3,0.5,3\n")
    (tmp_path / "supp_placement_matched.csv").write_text(
        header + ',"placement=mlp, rank=29, alpha=29",Last,76.0,0.3,3\n'
    )
    (tmp_path / "peft.csv").write_text(
        header + "Accuracy,codyra,StanfordCars,81.0,0.4,3\nParameters (M),codyra,StanfordCars,3.8,0.1,3\n"
    )
    rows = {(r[0], r[1]): r for r in named_table_rows(cfg, tmp_path)}
    # the paper's "CoDyRA~ (r_init = 16)" on Cars: 81.61 / 3.75M; ours on StanfordCars, its accuracy compared
    cars = rows[("peft / Cars", "codyra")]
    assert cars[2:4] == [COMPARED, "CoDyRA~ (r_init = 16)"] and cars[5:9] == ["81.61", "81.00 ± 0.40", "-0.61", "ok"]
    assert rows[("peft / Caltech101", "Zero-shot")][2] == NOT_RUN and ("peft / Cars", "lora-r16") in rows
    dtd = rows[("supp_dtd / DeltaP r4", "attn")]  # paper: 30.3 ± 0.5; spread sqrt(0.5^2 + 0.5^2)
    assert dtd[2] == COMPARED and dtd[5] == "30.30 ± 0.50" and dtd[7] == "+1.00" and dtd[8] == "ok"
    matched = rows[("supp_placement_matched / Last", "placement=mlp, rank=29, alpha=29")]  # paper: 75.5, no std
    assert matched[2] == COMPARED and matched[3] == "MLP-only r=29" and matched[7] == "+0.50" and matched[8] == "ok"
    assert rows[("supp_norm_matched / Forgetting", "LoRA r=1")][2] == NOT_RUN


def test_the_cli_runs_a_command_on_a_single_task_study(tiny_cfg_dict, tmp_path):
    import yaml

    from codyra.cli import _config, build_parser

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(study_cfg(tiny_cfg_dict, methods=["lora-r4"])))
    argv = ["train", "--config", str(path), "--single-task", "hue", "--method", "lora-r4", "--seed", "0", "--task", "1"]
    args = build_parser().parse_args(argv)
    args.config_dict = None
    cfg = _config(args)
    assert cfg["benchmark"] == "tiny-single-hue" and list(cfg["tasks"]) == ["hue"]
    args.single_task = "digits"
    with pytest.raises(ConfigError, match="no single-task study trains 'digits'"):
        _config(args)


def test_a_mini_study_is_ranked_against_the_paper(tmp_path):
    from codyra.analysis.named_tables import named_table_orders
    from codyra.experiment.config import read_config_file

    cfg = load_config(read_config_file("config/mini_ablations.yaml"))
    header = "block,row,column,mean,std,n_seeds\n"
    for name in ("supp_eurosat", "supp_flowers", "supp_norm_matched", "supp_placement_matched", "peft"):
        (tmp_path / f"{name}.csv").write_text(header)
    # paper supp_dtd Fgt r4: vision 14.78 > mlp 5.50 > all 5.04 > text 3.52 > attn 2.25 (lower is better)
    ours = {"attn": 1.0, "mlp": 4.0, "vision": 9.0, "text": 2.0, "all": 3.0}
    lines = "".join(f",{row},Forgetting rank=4,{v},0.1,3\n" for row, v in ours.items())
    (tmp_path / "supp_dtd.csv").write_text(header + lines)
    (row,) = named_table_orders(cfg, tmp_path)
    assert row[0] == "supp_dtd / Fgt r4" and row[2] == row[3] == "attn > text > all > mlp > vision"
    assert row[4] == "10/10" and row[5] == "1.00"


def test_a_summary_table_spans_studies_with_accuracy_and_kept_parameters(tiny_cfg_dict, monkeypatch):
    """Paper table peft: a column per study's task; zero-shot, then per method accuracy / kept parameters."""
    from codyra.analysis import single_task as st

    tiny_cfg_dict["seeds"] = [0, 1]
    tiny_cfg_dict["single_task"] = {
        "reference_tasks": ["shape"],
        "studies": {
            "peft_hue": {"task": "hue", "methods": ["lora-r4", "codyra"], "summary": "peft"},
            "peft_count": {"task": "count", "methods": ["lora-r4"], "summary": "peft"},
            "other": {"task": "hue", "methods": ["lora-r4"]},
        },
    }
    cfg = load_config(tiny_cfg_dict)
    assert st.summaries(cfg) == {"peft": ["peft_hue", "peft_count"]}
    assert st.single_task_outputs(cfg)[0][-1] == "peft"

    def lora(rank: int, d_in: int = 8, d_out: int = 6) -> TaskUpdate:
        tensors = {"t.A": torch.ones(rank, d_in), "t.B": torch.ones(d_out, rank), "t.w": torch.ones(rank)}
        return TaskUpdate("lora", tensors, {"t": {"param": "p", "rows": None}})

    assert st.kept_params(lora(4)) == 4 * (8 + 6)  # A and B; the gates are not counted
    assert st.kept_params(TaskUpdate("delta", {"p": torch.ones(3, 5)})) == 15
    accuracy = {("hue", "lora-r4"): (70.0, 72.0), ("hue", "codyra"): (75.0, 77.0), ("count", "lora-r4"): (50.0, 50.0)}
    ranks = {("hue", "lora-r4"): 4, ("hue", "codyra"): 3, ("count", "lora-r4"): 4}

    def study_records(cfg, name):
        task = cfg["single_task"]["studies"][name]["task"]
        methods = cfg["single_task"]["studies"][name]["methods"]
        return {"task": task}, [
            st.Run(m, m, {}, [record(40.0 + s, a, 60.0, 60.0) for s, a in enumerate(accuracy[task, m])])
            for m in methods
        ]

    monkeypatch.setattr(st, "study_records", study_records)
    monkeypatch.setattr(
        "codyra.store.updates.stored_update",
        lambda cfg_task, method, seed, i: lora(ranks[cfg_task["task"], method] + seed),  # ranks 4, 5 / 3, 4
    )
    table = st.summary_table(cfg, "peft", st.summaries(cfg)["peft"])
    assert table.columns == ["hue", "count"]
    assert table.rows == [
        ("Accuracy", "Zero-shot", [[40.0, 41.0], [40.0, 41.0]]),
        ("Accuracy", "lora-r4", [[70.0, 72.0], [50.0, 50.0]]),
        ("Accuracy", "codyra", [[75.0, 77.0], None]),
        ("Parameters (M)", "lora-r4", [[56e-6, 70e-6], [56e-6, 70e-6]]),  # 4 x 14 and 5 x 14 parameters
        ("Parameters (M)", "codyra", [[42e-6, 56e-6], None]),  # 3 x 14 and 4 x 14
    ]
    md = to_markdown(table).splitlines()
    assert md[6] == "| lora-r4 | 71.00 ± 1.41 | 50.00 ± 0.00 |" and md[-1] == "| codyra | 0.00 ± 0.00 | -- |"


def test_a_summary_table_may_not_take_a_studys_name(tiny_cfg_dict):
    tiny_cfg_dict["single_task"] = {
        "reference_tasks": ["shape"],
        "studies": {"peft": {"task": "hue", "methods": ["lora-r4"], "summary": "peft"}},
    }
    with pytest.raises(ConfigError, match="summary: 'peft' is a study's table"):
        load_config(tiny_cfg_dict)
