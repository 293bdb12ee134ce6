"""A table's four renderings (codyra.evaluation.table_formats) on a hand-made table, apart from the
paper's tables built on them: means and sample standard deviations, the best mean per column within
a block, the reference row that never takes it, a lower-is-better column, empty cells and signs."""

from __future__ import annotations

import csv
import io

from codyra.evaluation.table_formats import Table, to_csv, to_html, to_latex, to_markdown, write_table


def hand_made() -> Table:
    return Table(
        name="demo",
        caption="A demo",
        columns=["acc", "loss"],
        rows=[
            ("Block", "X", [[1.0, 3.0], [-0.5, -1.5]]),  # acc 2 ± sqrt(2) (ddof 1); loss -1 ± 0.707
            ("Block", "Y", [[2.0, 2.0], None]),  # acc ties X's mean; no loss
            ("Block", "Z", [[0.5], [4.0]]),
            ("Block", "Zero-shot", [[9.0], [-9.0]]),  # the best of both columns, never marked
        ],
        higher_is_better={"loss": False},
        reference={"Zero-shot"},
        row_header="Method",
    )


def test_markdown_marks_ties_and_the_lowest_loss_never_the_reference():
    assert to_markdown(hand_made()).splitlines() == [
        "**A demo**",
        "",
        "| Method | acc | loss |",
        "|---|---|---|",
        "| *Block* | | |",
        "| X | **2.0 ± 1.4** | **\u22121.0 ± 0.7** |",
        "| Y | **2.0 ± 0.0** | -- |",
        "| Z | 0.5 | 4.0 |",
        "| Zero-shot | 9.0 | \u22129.0 |",
    ]


def test_csv_keeps_three_more_decimals_ascii_signs_and_the_seed_counts():
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(to_csv(hand_made())))}
    assert (rows["X", "acc"]["mean"], rows["X", "acc"]["std"], rows["X", "acc"]["n_seeds"]) == ("2.0", "1.4142", "2")
    assert (rows["X", "loss"]["mean"], rows["X", "loss"]["std"], rows["X", "loss"]["best"]) == (
        "-1.0",
        "0.7071",
        "True",
    )
    assert (rows["Y", "loss"]["mean"], rows["Y", "loss"]["n_seeds"]) == ("", "0")
    assert [r["best"] for r in rows.values() if r["row"] == "Zero-shot"] == ["False", "False"]


def test_latex_and_html_bold_the_best_and_grey_the_reference():
    latex = to_latex(hand_made(), "mini")
    assert r"\label{tab:mini-demo}" in latex and r"\begin{tabular}{lcc}" in latex
    assert r"X & \textbf{2.0 $\pm$ 1.4} & \textbf{$-$1.0 $\pm$ 0.7} \\" in latex
    assert r"\textcolor{gray}{Zero-shot} & \textcolor{gray}{9.0} & \textcolor{gray}{$-$9.0} \\" in latex
    html = to_html(hand_made())
    assert "<tr><th>Y</th><td><b>2.0 ± 0.0</b></td><td>--</td></tr>" in html
    assert '<th class="reference">Zero-shot</th><td class="reference">9.0</td>' in html


def test_write_table_writes_the_four_formats_and_the_wide_latex(tmp_path):
    write_table(tmp_path, hand_made(), "mini", wide=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "demo-wide.tex",
        "demo.csv",
        "demo.html",
        "demo.md",
        "demo.tex",
    ]
    assert r"\begin{table*}" in (tmp_path / "demo-wide.tex").read_text()
    assert "demo-wide.tex" in (tmp_path / "demo.tex").read_text()  # each names the other
