"""The paper's tables as a paper takes them (codyra.evaluation.tables) and the figures comparing the
methods (codyra.evaluation.figures), from a hand-made grid of three methods, three seeds, three tasks."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codyra.evaluation import table_formats, tables
from codyra.experiment.config import config_from_files, load_config

from ..conftest import ROOT

# base A matrices (rows i = 0..3, columns colour, digits, count); seed s adds s to every cell but row 0
BASE = {
    "zeroshot": [[40.0, 30.0, 29.4]] * 4,
    "lora-r4": [[40.0, 30.0, 29.4], [90.0, 25.0, 15.0], [60.0, 85.0, 10.0], [35.0, 50.0, 88.0]],
    "codyra": [[40.0, 30.0, 29.4], [50.0, 31.0, 21.0], [55.0, 70.0, 22.0], [60.0, 65.0, 80.0]],
}


def matrix(method: str, seed: int) -> list[list[float]]:
    shift = 0 if method == "zeroshot" else seed
    return [row if i == 0 else [v + shift for v in row] for i, row in enumerate(BASE[method])]


@pytest.fixture
def grid(tiny_cfg_dict, monkeypatch):
    cfg = load_config({**tiny_cfg_dict, "seeds": [0, 1, 2], "methods": list(BASE)})
    runs = {m: [{"A": matrix(m, s), "seed": s} for s in cfg["seeds"]] for m in cfg["methods"]}
    monkeypatch.setattr(tables, "load_runs", lambda cfg, classes: runs)
    return cfg, runs


def rows_of(csv_text: str) -> dict[tuple[str, str], dict]:
    return {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(csv_text))}


def test_negative_numbers_carry_a_minus_sign_where_displayed_and_a_hyphen_in_the_csv(grid):
    cfg, runs = grid
    table = tables.forgetting_table(cfg, runs, tables.grid_layout(cfg))
    # CoDyRA: Forgetting ((50 - 60) + (70 - 65)) / 2 = -2.5, BWT (min(10, 0) + min(-5, 0) + 0) / 3 = -1.67
    codyra = next(line for line in table_formats.to_markdown(table).splitlines() if line.startswith("| CoDyRA |"))
    assert [cell.strip("*") for cell in codyra.split(" | ")[1:3]] == ["\u22122.5 ± 0.0", "\u22121.7 ± 0.0"]
    assert "<b>\u22122.5 ± 0.0</b>" in table_formats.to_html(table)  # bold: the least forgetting
    latex = table_formats.to_latex(table, "tiny")
    assert r"CoDyRA & \textbf{$-$2.5 $\pm$ 0.0} & \textbf{$-$1.7 $\pm$ 0.0} & " in latex and "\u2212" not in latex
    row = rows_of(table_formats.to_csv(table))["CoDyRA", "Forgetting"]
    assert (row["mean"], row["std"]) == ("-2.5", "0.0")
    # a mean that rounds to zero prints without a sign; hyphens inside names stay hyphens
    assert table_formats._fmt((-0.04, 0.01, 3)) == "0.0 ± 0.0"
    assert table_formats.tex_text("lora-r16, Llama-2-7b, 2026-11-29, -3.5 and (-0.5)") == (
        "lora-r16, Llama-2-7b, 2026-11-29, $-$3.5 and ($-$0.5)"
    )


def test_captions_name_the_benchmark_and_count_the_seeds(grid):
    cfg, runs = grid
    for table in (
        tables.table1(cfg, runs, tables.grid_layout(cfg)),
        tables.forgetting_table(cfg, runs, tables.grid_layout(cfg)),
    ):
        assert table.caption.endswith("on the mini benchmark; mean ± std over 3 seeds")
        assert "[0, 1, 2]" not in table.caption and "tiny" not in table.caption
    one = {**cfg, "seeds": [4]}
    assert tables.matrix_table(one, "codyra", "CoDyRA", runs["codyra"][:1]).caption.endswith("; seed 4")


@pytest.mark.parametrize(
    ("config", "title"),
    [
        ("config.yaml", "the mini benchmark"),
        ("mini_trace.yaml", "the mini TRACE benchmark"),
        ("mini_blip.yaml", "the mini benchmark with BLIP"),
        ("mtil_5shot.yaml", "MTIL (5-shot)"),
        ("mtil_full.yaml", "MTIL (full-shot)"),
        ("xtail_16shot.yaml", "X-TAIL (16-shot)"),
        ("blip_xtail_16shot.yaml", "X-TAIL (16-shot) with BLIP"),
        ("trace.yaml", "TRACE (Llama-2-7b-chat-hf)"),
    ],
)
def test_each_paper_config_has_its_benchmarks_display_name(config, title):
    assert tables.benchmark_title(load_config(config_from_files([Path(ROOT) / "config" / config], {}))) == title


def test_the_forgetting_table_defines_its_columns_and_drops_op_which_is_last(grid):
    cfg, runs = grid
    table = tables.forgetting_table(cfg, runs, tables.grid_layout(cfg))
    assert table.columns == ["Forgetting", "BWT", "Transfer", "Average", "Last"]
    for definition in (
        "Forgetting (the paper's: the mean over tasks j < N of A[j,j] − A[N,j]; lower is better)",
        "BWT (TreeLoRA's: the mean over all tasks of min(A[N,j] − A[j,j], 0); higher is better)",
        "Transfer (A[i,j] over i < j)",
        "Average (A[i,j] over i = 1..N)",
        "Last (A[N,j]; its mean is TRACE's Overall Performance, OP)",
    ):
        assert definition in table.caption
    assert (
        r"\caption{Forgetting (the paper's: the mean over tasks j $<$ N of A[j,j] $-$ A[N,j]"
        in table_formats.to_latex(table, "tiny")
    )
    # LoRA: Forgetting ((90 - 35) + (85 - 50)) / 2 = 45, Last (35 + 50 + 88) / 3 + seed 0, 1, 2
    lora = dict(zip(table.columns, next(s for _, label, s in table.stats() if label == "LoRA (r=4)"), strict=True))
    assert lora["Forgetting"] == (45.0, 0.0, 3) and lora["Last"] == (pytest.approx(173 / 3 + 1), 1.0, 3)


def test_a_matrix_table_marks_no_best_and_heads_its_rows_as_models(grid):
    cfg, runs = grid
    table = tables.matrix_table(cfg, "codyra", "CoDyRA", runs["codyra"])
    assert table.best() == set()
    md = table_formats.to_markdown(table).splitlines()
    assert md[2] == "| Model | colour | digits | count |"
    assert md[4].startswith("| pretrained | 40.0 ± 0.0 |") and md[5].startswith("| after 1: colour | 51.0 ± 1.0 |")
    assert "**" not in "\n".join(md[2:])
    latex = table_formats.to_latex(table, "tiny")
    assert r"Model & colour & digits & count \\" in latex and r"\textbf" not in latex
    html = table_formats.to_html(table)
    assert "<tr><th>Model</th><th>colour</th>" in html and "<td><b>" not in html
    # the method comparisons keep their bold and name their rows
    assert r"Method & colour & digits & count & Average \\" in table_formats.to_latex(
        tables.table1(cfg, runs, tables.grid_layout(cfg)), "tiny"
    )
    assert tables.forgetting_table(cfg, runs, tables.grid_layout(cfg)).best()


def test_csv_values_are_rounded_without_float_noise(grid):
    cfg, runs = grid
    assert float(np.mean([29.4] * 3)) != 29.4  # the noise a plain mean leaves
    rows = rows_of(table_formats.to_csv(tables.matrix_table(cfg, "zeroshot", "Zero-shot", runs["zeroshot"])))
    assert (rows["pretrained", "count"]["mean"], rows["pretrained", "count"]["std"]) == ("29.4", "0.0")
    # Last of LoRA: 173 / 3 + 1 = 58.666..., to the table's 1 decimal + 3
    assert (
        rows_of(table_formats.to_csv(tables.forgetting_table(cfg, runs, tables.grid_layout(cfg))))[
            "LoRA (r=4)", "Last"
        ]["mean"]
        == "58.6667"
    )


def test_tables_with_a_column_per_task_have_a_table_star_form(grid):
    cfg, _ = grid
    out = tables.write_tables(cfg)
    assert tables.wide_table_names(cfg) == ["table1", "A_zeroshot", "A_lora-r4", "A_codyra"]
    assert sorted(p.stem for p in out.glob("*-wide.tex")) == sorted(f"{n}-wide" for n in tables.wide_table_names(cfg))
    narrow, wide = (out / "table1.tex").read_text(), (out / "table1-wide.tex").read_text()
    assert r"\begin{table}[t]" in narrow and r"\end{table}" in narrow and "table1-wide.tex" in narrow.splitlines()[1]
    assert r"\begin{table*}[t]" in wide and r"\end{table*}" in wide
    assert wide.replace("table*", "table").splitlines()[2:] == narrow.splitlines()[2:]  # the same table
    assert not (out / "forgetting-wide.tex").exists()


LATEX_PACKAGES = [f"{p}.sty" for p in table_formats.LATEX_PACKAGES]


def latex_missing() -> str | None:
    if shutil.which("pdflatex") is None:
        return "pdflatex is not installed"
    found = subprocess.run(["kpsewhich", *LATEX_PACKAGES], check=False, capture_output=True, text=True).stdout.split()
    missing = [p for p in LATEX_PACKAGES if not any(f.endswith("/" + p) for f in found)]
    return f"LaTeX packages missing: {', '.join(missing)}" if missing else None


def compile_log(folder: Path, options: str, files: list[Path]) -> str:
    """pdflatex's log of a minimal article (``options``) that inputs ``files``, a page each (second pass)."""
    packages = ",".join(table_formats.LATEX_PACKAGES)
    body = "\n\\clearpage\n".join(rf"\input{{{f.name}}}" for f in files)
    document = folder / f"doc-{options or 'onecolumn'}.tex"
    document.write_text(
        f"\\documentclass[{options}]{{article}}\n\\usepackage{{{packages}}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n"
    )
    for _ in range(2):  # as a paper is built: the second pass reads the labels the first one wrote
        done = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", document.name],
            check=False,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
        )
        log = document.with_suffix(".log").read_text(errors="replace")
        assert done.returncode == 0, log[-3000:]
    return log


@pytest.mark.skipif(latex_missing() is not None, reason=latex_missing() or "")
def test_every_latex_table_compiles_without_a_warning_in_one_and_two_column_articles(grid):
    cfg, _ = grid
    out = tables.write_tables(cfg)
    wide = sorted(out.glob("*-wide.tex"))
    narrow = sorted(set(out.glob("*.tex")) - set(wide))
    for options, files in (("", narrow), ("twocolumn", wide)):
        log = compile_log(out, options, files)
        problems = re.findall(r"^.*(?:Warning|Overfull|Underfull).*$", log, flags=re.MULTILINE)
        assert problems == [], problems


def errorbar_data(container) -> tuple[tuple[float, float], tuple[float, float]]:
    """((x, half width of the x bar), (y, half height of the y bar)) of a scatter point as drawn."""
    (x,), (y,) = container.lines[0].get_xdata(), container.lines[0].get_ydata()
    horizontal, vertical = (np.asarray(c.get_segments()[0]) for c in container.lines[2])
    return (x, np.ptp(horizontal[:, 0]) / 2), (y, np.ptp(vertical[:, 1]) / 2)


def test_the_comparison_figures_draw_the_tables_numbers(grid):
    cfg, runs = grid
    forgetting = tables.forgetting_table(cfg, runs, tables.grid_layout(cfg))
    matrices = [tables.matrix_table(cfg, m, m, runs[m]) for m in cfg["methods"]]
    figures = tables.save_comparisons(cfg, forgetting, matrices)
    assert list(figures) == tables.comparison_names(cfg)
    folder = tables.figures_dir(cfg)
    assert all((folder / f"{name}.{ext}").is_file() for name in figures for ext in ("png", "pdf"))
    scatter = figures["comparison_last_forgetting"].axes[0]
    drawn = {c.get_label(): errorbar_data(c) for c in scatter.containers}
    forget, last = forgetting.columns.index("Forgetting"), forgetting.columns.index("Last")
    expected = {label: (s[forget][:2], s[last][:2]) for _, label, s in forgetting.stats()}
    assert drawn.keys() == expected.keys() == {"Zero-shot", "LoRA (r=4)", "CoDyRA"}
    for label, (x, y) in expected.items():
        assert drawn[label] == (pytest.approx(x), pytest.approx(y))
    assert drawn["LoRA (r=4)"] == ((45.0, 0.0), (pytest.approx(173 / 3 + 1), pytest.approx(1.0)))  # by hand
    # per task j, a line per method: A[i][j] for i = 0..N, its band mean ± std over seeds
    panels = figures["comparison_per_task"].axes[:3]
    labels = {m: label for label, m in forgetting.methods.items()}
    for method, table in zip(cfg["methods"], matrices, strict=True):
        stats = [s for _, _, s in table.stats()]
        for j, ax in enumerate(panels):
            (line,) = [line for line in ax.get_lines() if line.get_label() == labels[method]]
            assert list(line.get_ydata()) == pytest.approx([row[j][0] for row in stats])
    codyra_on_digits = next(line for line in panels[1].get_lines() if line.get_label() == "CoDyRA")
    assert list(codyra_on_digits.get_ydata()) == [30.0, 32.0, 71.0, 66.0]  # base + the mean shift 1 after row 0
    band = panels[1].collections[cfg["methods"].index("codyra")].get_paths()[0].vertices
    assert {round(y, 6) for x, y in band if x == 2} == {70.0, 72.0}  # 71 ± 1
