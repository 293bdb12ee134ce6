"""Task-agnostic inference (CoDyRA-dagger) on the tiny mini run, and the grouped tables."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codyra.evaluation import table_formats, tables
from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.train_job import train_task
from codyra.methods import _routing as routing
from codyra.methods import method_classes
from codyra.store.cells import read_cell
from codyra.store.io import ResultError, write_json
from codyra.store.paths import cell_path


@pytest.fixture
def dagger_run(tiny_run):
    tiny_run["method_configs"]["codyra-dagger"] = {**tiny_run["method_configs"]["codyra"], "kind": "codyra_dagger"}
    for method in ("codyra", "codyra-dagger"):
        for i in (1, 2):
            train_task(tiny_run, method, 0, i)
    return tiny_run


@pytest.mark.slow
def test_dagger_routes_unlearned_domains_to_theta_i_and_learned_ones_to_theta_k(dagger_run, monkeypatch):
    cfg = dagger_run
    plain = {(i, j): evaluate_row(cfg, "codyra", 0, i, [j])[0]["accuracy"] for i in (1, 2) for j in (1, 2, 3)}
    # row 1: theta_1 is the only learned model, every image goes to it: the plain run's cells exactly
    row1 = evaluate_row(cfg, "codyra-dagger", 0, 1)
    assert [c["accuracy"] for c in row1] == [plain[1, j] for j in (1, 2, 3)]
    cell = read_cell(cfg, cell_path(cfg, "codyra-dagger", 0, 1, 1), "codyra-dagger", 0, 1, 1, classifies=True)
    assert cell["routing"]["router"] == "zero_shot" and cell["routing"]["samples"] == cell["num_samples"]
    assert 0 <= cell["routing"]["accuracy"] <= 100
    # a perfect router sends task j's images to theta_j: row 2 reproduces the plain diagonal A[j, j]
    # for learned tasks and the plain row 2 for the unseen task 3
    for j in (1, 2, 3):
        true_route = j - 1 if j <= 2 else routing.ZERO_SHOT
        monkeypatch.setattr(
            "codyra.methods.codyra_dagger.clip.route_learned",
            lambda domains, learned, r=true_route: torch.full_like(domains, r),
        )
        (cell,) = evaluate_row(cfg, "codyra-dagger", 0, 2, [j])
        assert cell["accuracy"] == (plain[j, j] if j <= 2 else plain[2, 3])
        assert cell["routing"]["accuracy"] == 100.0


def test_a_cell_with_an_absurd_routing_accuracy_is_refused(tiny_run):
    cfg = tiny_run
    path = cell_path(cfg, "codyra", 0, 1, 1)
    cell = {
        "accuracy": 50.0,
        "benchmark": cfg["benchmark"],
        "method": "codyra",
        "seed": 0,
        "i": 1,
        "j": 1,
        "task": cfg["tasks"][0],
        "num_classes": 3,
        "routing": {"accuracy": float("nan")},
    }
    write_json(path, cell)
    with pytest.raises(ResultError, match="routing accuracy nan"):
        read_cell(cfg, path, "codyra", 0, 1, 1, classifies=True)


def _cfg(methods, kinds, kind="mini"):
    return {
        "benchmark": "b",
        "seeds": [0, 1],
        "tasks": ["a", "b"],
        "model": {"family": "causal_lm" if kind == "trace" else "clip", "name": "org/model", "pretrained": None},
        "llm": {"mini": None},
        "data": {"kind": kind},
        "methods": methods,
        "method_configs": {m: {"kind": k} for m, k in zip(methods, kinds, strict=True)},
        "analysis": {},
    }


def _runs(values):
    """method -> two seeds' matrices; A of seed s is values[method] + s (rows i = 0..2, columns a, b)."""
    return {m: [{"A": (np.asarray(a, float) + s).tolist(), "seed": s} for s in (0, 1)] for m, a in values.items()}


def test_tables_group_methods_and_mark_the_best_within_each_group():
    cfg = _cfg(["zeroshot", "codyra", "lora-r16", "codyra-dagger"], ["zeroshot", "codyra", "lora", "codyra_dagger"])
    A = {
        "zeroshot": [[50, 40], [50, 40], [50, 40]],
        "codyra": [[50, 40], [80, 45], [78, 70]],
        "lora-r16": [[50, 40], [85, 30], [60, 75]],
        "codyra-dagger": [[50, 40], [80, 45], [79, 70]],
    }
    table = tables.forgetting_table(cfg, _runs(A), tables.grid_layout(cfg))
    # paper order: reference, complementation, continually learned; the dagger on the routed method
    assert [label for _, label, _ in table.rows] == ["Zero-shot", "CoDyRA†", "CoDyRA", "LoRA (r=16)"]
    md = table_formats.to_markdown(table).splitlines()
    assert md[4] == "| ***Zero-shot reference*** |" + " |" * 5
    assert md[6] == "| ***Model complementation*** |" + " |" * 5
    assert md[8] == "| ***Model continually learned*** |" + " |" * 5
    # Last: codyra (mean 74.5) against lora-r16 (68.5) within the continually learned group
    best = table.best()
    last = table.columns.index("Last")
    assert ("", "CoDyRA", last) in best and ("", "LoRA (r=16)", last) not in best
    assert not any(label == "CoDyRA†" for _, label, _ in best)  # a group of one has no best
    csv = table_formats.to_csv(table).splitlines()
    assert csv[0] == "block,group,row,method,column,mean,std,n_seeds,best"
    assert csv[1].startswith(",Zero-shot reference,Zero-shot,zeroshot,Forgetting,")
    assert r"\multicolumn{6}{l}{\textbf{\textit{Model complementation}}} \\" in table_formats.to_latex(table, "b")


def test_table2_groups_its_method_columns(monkeypatch):
    cfg = _cfg(["codyra", "codyra-dagger", "lora-r16"], ["codyra", "codyra_dagger", "lora"], kind="trace")
    A = {
        "codyra": [[0, 0], [60, 0], [50, 40]],
        "codyra-dagger": [[0, 0], [60, 0], [55, 45]],
        "lora-r16": [[0, 0], [70, 0], [40, 60]],
    }
    table = tables.table2(cfg, _runs(A), tables.grid_layout(cfg))
    assert table.columns == ["CoDyRA†", "CoDyRA", "LoRA (r=16)"]
    md = table_formats.to_markdown(table).splitlines()
    assert md[4] == "| *group* | Model complementation | Model continually learned | Model continually learned |"
    # OP: codyra 45.5 vs lora 50.5 within the continually learned group; the dagger is alone in its group
    assert table.best() == {("", "OP", 2), ("", "Forgetting", 1)}


def test_routing_table_averages_router_accuracy_over_learned_rows(tmp_path):
    cfg = _cfg(["codyra", "codyra-dagger"], ["codyra", "codyra_dagger"])
    runs = _runs({"codyra": [[0, 0]] * 3, "codyra-dagger": [[0, 0]] * 3})
    for s, matrix in enumerate(runs["codyra-dagger"]):
        matrix["routing"] = [[None, None], [90 + s, 50], [80 + s, 70]]
    table = tables.routing_table(cfg, runs, tables.grid_layout(cfg))
    assert [label for _, label, _ in table.rows] == ["CoDyRA†"]
    ((_, _, stats),) = table.stats()
    assert stats[0][:2] == (85.5, pytest.approx(np.std([85, 86], ddof=1))) and stats[1][0] == 60.0
    assert stats[2][0] == pytest.approx(np.mean([(85 + 60) / 2, (86 + 60) / 2]))
    assert tables.table_names(cfg) == ["table1", "forgetting", "routing", "A_codyra", "A_codyra-dagger"]
    del runs["codyra-dagger"][0]["routing"]
    with pytest.raises(ValueError, match="has no routing accuracies"):
        tables.routing_table({**cfg, "results": str(tmp_path)}, runs, tables.grid_layout(cfg))


def test_tables_without_complementation_methods_are_unchanged():
    cfg = _cfg(["zeroshot", "codyra"], ["zeroshot", "codyra"])
    table = tables.table1(
        cfg, _runs({"zeroshot": [[50, 40]] * 3, "codyra": [[50, 40], [70, 45], [68, 60]]}), tables.grid_layout(cfg)
    )
    assert table.groups == {} and "***" not in table_formats.to_markdown(table)
    assert table_formats.to_csv(table).splitlines()[0] == "block,row,method,column,mean,std,n_seeds,best"
    assert [label for _, label, _ in table.rows[:2]] == ["Zero-shot", "CoDyRA"]


def test_the_zero_shot_reference_never_takes_the_bold_and_is_greyed_out():
    cfg = _cfg(["zeroshot", "codyra", "lora-r16"], ["zeroshot", "codyra", "lora"])
    A = {  # zero-shot: the highest Last (45) and no forgetting, yet never best
        "zeroshot": [[50, 40]] * 3,
        "codyra": [[50, 40], [40, 30], [30, 35]],
        "lora-r16": [[50, 40], [45, 30], [20, 20]],
    }
    table = tables.forgetting_table(cfg, _runs(A), tables.grid_layout(cfg))
    best = table.best()
    for column, winner in (("Last", "CoDyRA"), ("Forgetting", "CoDyRA")):
        assert {label for _, label, c in best if table.columns[c] == column} == {winner}
    assert table.reference == {"Zero-shot"}
    latex = table_formats.to_latex(table, "b").splitlines()
    assert next(line for line in latex if "Zero-shot" in line).startswith(
        r"\textcolor{gray}{Zero-shot} & \textcolor{gray}{"
    )
    assert '<th class="reference">Zero-shot</th><td class="reference">' in table_formats.to_html(table)


def test_latex_tables_are_labelled_per_benchmark_and_fit_the_page():
    cfg = _cfg(["zeroshot", "codyra", "codyra-dagger"], ["zeroshot", "codyra", "codyra_dagger"])
    A = {m: [[50, 40], [70, 45], [68, 60]] for m in cfg["methods"]}
    latex = table_formats.to_latex(tables.table1(cfg, _runs(A), tables.grid_layout(cfg)), "xtail-16shot").splitlines()
    assert latex[0] == r"% needs \usepackage{booktabs}, \usepackage{adjustbox}, \usepackage{xcolor}"
    assert latex[1:9] == [
        r"\begin{table}[t]",
        r"\centering",
        (
            r"\caption{Transfer, Average and Last accuracy (\%) per task and their mean on the mini benchmark; "
            r"mean $\pm$ std over 2 seeds}"
        ),
        r"\label{tab:xtail-16shot-table1}",
        r"\begin{adjustbox}{max width=\linewidth}",
        r"\begin{tabular}{lccc}",
        r"\toprule",
        r"Method & a & b & Average \\",
    ]
    assert latex[-4:] == [r"\bottomrule", r"\end{tabular}", r"\end{adjustbox}", r"\end{table}"]
    assert any(line.startswith(r"CoDyRA$^\dagger$ & ") for line in latex)  # one dagger, in LaTeX's notation
    assert all("±" not in line and "†" not in line for line in latex)


def test_row_labels_are_display_names_unless_two_methods_share_one():
    cfg = _cfg(
        ["zeroshot", "full-ft", "lora-r16", "lora-r8", "codyra", "codyra-b", "sora"],
        ["zeroshot", "full", "lora", "lora", "codyra", "codyra", "sora"],
    )
    cfg["method_configs"]["lora-r8"]["rank"] = 8
    cfg["analysis"] = {"paper_names": {"sora": "SoRA-gated"}}
    assert tables.row_labels(cfg, method_classes(cfg, cfg["methods"])) == {
        "zeroshot": "Zero-shot",
        "full-ft": "Full FT",  # no paper row: the kind's display name
        "lora-r16": "LoRA (r=16)",
        "lora-r8": "LoRA (r=8)",  # the template filled in with the method's options
        "codyra": "codyra",  # two rows would read "CoDyRA": both keep their config names
        "codyra-b": "codyra-b",
        "sora": "SoRA-gated",  # the config's analysis.paper_names wins
    }


def _rail_states(cfg, options, upto):
    """RAIL's states after tasks 1..upto, fitted on one pass of theta_0's features (global labels)."""
    from codyra.clip.features import task_feature_batches
    from codyra.methods.rail import clip as analytic

    states, state, feats = [], None, []
    for i in range(1, upto + 1):
        batches, classes = task_feature_batches(cfg, 0, i, {**cfg["train"], "batch_size": 16}, torch.device("cpu"))
        state = analytic.fit(options, state, batches, classes, seed=0)
        states.append(state)
        feats += batches
    return states, feats


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["primal", "dual"])
def test_rail_on_the_tiny_run_keeps_zero_shot_transfer_and_fits_the_joint_regression(tiny_run, variant):
    from codyra.clip.model import pretrained_clip
    from codyra.methods.rail import clip as analytic
    from codyra.methods.rail import regression as rail_math
    from codyra.methods.rail.method import RAIL

    cfg = tiny_run
    # prompts: dataset, so RAIL's zero-shot head is the benchmark's zero-shot row's
    options = RAIL(
        {"kind": "rail", "variant": variant, "hidden_dim": 64, "precision": "float64", "prompts": "dataset"}
    ).options
    states, feats = _rail_states(cfg, options, 2)
    if variant == "primal":  # the recursion over two tasks is the joint ridge solve over their features
        w = analytic.expansion(options, 0, feats[0][0].shape[1])
        x = torch.cat([rail_math.expand(f.double(), w) for f, _ in feats])
        y = torch.nn.functional.one_hot(torch.cat([lab for _, lab in feats]), states[1]["W"].shape[1]).double()
        direct = torch.linalg.solve(x.T @ x + 0.1 * torch.eye(x.shape[1], dtype=torch.float64), x.T @ y)
        torch.testing.assert_close(states[1]["W"], direct)
    zero_shot = {j: evaluate_row(cfg, "pretrained", None, 0, [j])[0]["accuracy"] for j in (1, 2, 3)}
    row = list(
        analytic.rail_row(cfg, "rail", options, 0, 1, [1, 2, 3], torch.device("cpu"), states[0], pretrained_clip(cfg))
    )
    # tasks not yet learned keep the zero-shot prediction (RAIL's Transfer equals zero-shot)
    assert [c["accuracy"] for c in row if c["j"] > 1] == [zero_shot[2], zero_shot[3]]
    assert all(0 <= c["routing"]["accuracy"] <= 100 for c in row)
    with pytest.raises(ValueError, match=r"after task 2 scores \d+ classes, tasks 1..2 have \d+"):
        list(analytic.rail_row(cfg, "rail", options, 0, 2, [1], torch.device("cpu"), states[0], pretrained_clip(cfg)))


def test_rail_through_the_engine_stores_its_state_and_evaluates_routed(tiny_run):
    from codyra.store.paths import task_dir
    from codyra.store.updates import load_method_state

    cfg = tiny_run
    cfg["method_configs"]["rail-primal"] = {
        "kind": "rail",
        "hidden_dim": 32,
        "prompts": "dataset",
    }  # zero-shot head = the zero-shot row's
    summaries = [train_task(cfg, "rail-primal", 0, i).summary for i in (1, 2)]
    state = load_method_state(task_dir(cfg, "rail-primal", 0, 2))
    # kept at inference: the 64 x 32 expansion and W (32 x the classes of tasks 1..2)
    assert state["W"].shape[0] == 32 and summaries[1]["inference_extra_params"] == 64 * 32 + state["W"].numel()
    assert (
        summaries[0]["trainable_params"] == 0 and summaries[1]["steps"] == 0 and summaries[1]["inference_memory"] == 0
    )
    cells = evaluate_row(cfg, "rail-primal", 0, 2)
    zero_shot = evaluate_row(cfg, "pretrained", None, 0, [3])[0]["accuracy"]
    assert cells[2]["accuracy"] == zero_shot and all("routing" in c for c in cells)
    assert (
        read_cell(cfg, cell_path(cfg, "rail-primal", 0, 2, 1), "rail-primal", 0, 2, 1, classifies=True)["routing"][
            "router"
        ]
        == "zero_shot"
    )


@pytest.mark.slow
@pytest.mark.parametrize("prompts, expected", [("rail", ("a photo of a {}.",)), ("dataset", None)])
def test_rail_and_the_dagger_router_embed_every_class_with_rails_prompt_by_default(
    tiny_run, monkeypatch, prompts, expected
):
    """RAIL's zero-shot head is ``clip_classifier(classnames, ['a photo of a {}.'])`` for every class
    (primal_RAIL.py l.234, dual_RAIL.py l.60); ``prompts: dataset`` keeps each dataset's templates."""
    from codyra.clip import zeroshot
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks
    from codyra.data.registry import label_space
    from codyra.methods.codyra_dagger import clip as routed
    from codyra.methods.codyra_dagger.method import CoDyRADagger
    from codyra.methods.rail import clip as analytic
    from codyra.methods.rail.method import RAIL

    cfg = tiny_run
    seen = []
    real = zeroshot.label_space_classifier
    monkeypatch.setattr(
        zeroshot, "label_space_classifier", lambda m, t, space, d: seen.append(space) or real(m, t, space, d)
    )
    options = RAIL({"kind": "rail", "hidden_dim": 16, "prompts": prompts}).options
    states, _ = _rail_states(cfg, options, 1)
    list(analytic.rail_row(cfg, "rail", options, 0, 1, [1], torch.device("cpu"), states[0], pretrained_clip(cfg)))
    union = label_space(build_tasks(cfg, pretrained_clip(cfg).image))
    want = union.templates if expected is None else tuple(expected for _ in union.datasets)
    assert seen[0].templates == want and seen[0].entries == union.entries
    if prompts == "rail":
        assert seen[0].prompts()[0] == [f"a photo of a {union.entries[0][1]}."]
    train_task(cfg, "codyra", 0, 1)
    cfg["method_configs"]["codyra-dagger"] = {
        **cfg["method_configs"]["codyra"],
        "kind": "codyra_dagger",
        "router_prompts": prompts,
    }
    train_task(cfg, "codyra-dagger", 0, 1)
    seen.clear()
    options = CoDyRADagger(cfg["method_configs"]["codyra-dagger"]).options
    list(routed.routed_row(cfg, "codyra-dagger", 0, 1, [2], torch.device("cpu"), options, lambda: pretrained_clip(cfg)))
    assert seen[0].templates == want  # the router; theta_k's classifiers keep the benchmark's templates
    assert all(space.templates == union.templates[1:2] for space in seen[1:])


def test_router_prompts_reject_an_unknown_choice():
    from codyra.clip.zeroshot import router_space
    from codyra.data.registry import LabelSpace

    space = LabelSpace(("a",), (0,), (("a", "cat"),), (("a {} here.",),))
    assert router_space(space, "rail").prompts() == [["a photo of a cat."]]
    assert router_space(space, "dataset") is space
    with pytest.raises(ValueError, match="unknown router prompts 'clip'; choose from rail, dataset"):
        router_space(space, "clip")
    with pytest.raises(ValueError, match="must contain"):
        space.with_template("a photo")


@pytest.mark.slow
def test_dagger_with_moe_adapters_selector_routes_each_test_batch_as_a_whole(tiny_run):
    """router: ddas, the other reading of "similar to MoE-Adapters": one autoencoder per task on
    theta_0's features; evaluation routes each batch of ddas_batch_size test images as a whole
    (MoE-Adapters' evaluation.py); CoDyRA's training is unchanged."""
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks
    from codyra.methods.codyra_dagger import clip as routed
    from codyra.methods.codyra_dagger.method import CoDyRADagger
    from codyra.methods.moe_adapters.clip import image_features, load_ddas
    from codyra.store.paths import task_dir
    from codyra.store.updates import load_method_state, load_update

    cfg = tiny_run
    cfg["method_configs"]["dagger-ddas"] = {
        **cfg["method_configs"]["codyra"],
        "kind": "codyra_dagger",
        "router": "ddas",
        "ae_iterations": 20,
        "ae_code_dim": 8,
        "ddas_batch_size": 16,
    }
    for method in ("codyra", "dagger-ddas"):
        for i in (1, 2):
            train_task(cfg, method, 0, i)
    plain, dagger = load_update(task_dir(cfg, "codyra", 0, 2)), load_update(task_dir(cfg, "dagger-ddas", 0, 2))
    assert all(torch.equal(plain.tensors[k], dagger.tensors[k]) for k in plain.tensors)  # CoDyRA's training unchanged
    state = load_method_state(task_dir(cfg, "dagger-ddas", 0, 2))
    autoencoders, thresholds = load_ddas(state)
    assert len(autoencoders) == 2 and thresholds.shape == (2,)
    options = CoDyRADagger(cfg["method_configs"]["dagger-ddas"]).options
    bundle = pretrained_clip(cfg)
    test = build_tasks(cfg, bundle.image)[2].test_set()
    routes = routed._ddas_routes(bundle.model.eval(), test, cfg, torch.device("cpu"), options, state)
    for start in range(0, len(test), 16):  # by hand: the batch's best autoencoder, or zero-shot above its threshold
        images = torch.stack([test[k][0] for k in range(start, min(start + 16, len(test)))])
        with torch.no_grad():
            losses = routing.reconstruction_losses(autoencoders, image_features(bundle.model, images))
        best = int(losses.argmin())
        expected = best if losses[best] <= thresholds[best] else routing.ZERO_SHOT
        assert routes[start : start + 16].tolist() == [expected] * len(images)
    (cell,) = evaluate_row(cfg, "dagger-ddas", 0, 2, [3])
    assert cell["routing"]["router"] == "ddas" and cell["routing"]["samples"] == len(test)


def test_evaluation_hands_a_routed_method_its_row_position_options_and_readers(tiny_cfg):
    from codyra.evaluation.routed import routed_cells
    from codyra.methods.base import Row
    from codyra.methods.rail.method import RAIL, RAILOptions

    seen = []

    class Seen(RAIL):  # the row as evaluation hands it over; reads nothing it is not asked for
        @classmethod
        def routed_cells(cls, row):
            seen.append(row)
            yield from ()

    tiny_cfg["method_configs"]["r"] = {"kind": "rail", "variant": "dual", "kernel_gamma": 0.5}
    spec = tiny_cfg["method_configs"]["r"]
    assert list(routed_cells(tiny_cfg, Row("r", 3, 2, (1, 3), Seen, spec), "cpu")) == []
    [row] = seen
    assert row.row == Row(method="r", seed=3, i=2, js=(1, 3), kind=Seen) and row.device == torch.device("cpu")
    assert row.options == RAILOptions(variant="dual", kernel_gamma=0.5) and row.cfg is tiny_cfg
    with pytest.raises(FileNotFoundError, match="r/seed3/task2/summary.json missing"):
        row.stored_state()  # task 2 of seed 3 was never trained
