"""scripts/render-results.py: a grid's summary restricted to a config's methods, and the tables and
figures of the paper target's analyses appended with the figures copied beside the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codyra.analysis.registry import outputs
from codyra.experiment.config import load_config
from codyra.store.paths import figures_dir, tables_dir

from .conftest import ROOT, load_script

ABLATIONS = Path(ROOT) / "config" / "mini_ablations.yaml"


def write_run(folder: Path, method: str, seed: int, last: list[float], forgetting: float) -> None:
    run = folder / method / f"seed{seed}"
    run.mkdir(parents=True)
    metrics = {"transfer": 10.0, "average": 20.0, "last": sum(last) / len(last), "forgetting": forgetting}
    matrix = {"seed": seed, "tasks": ["a", "b"], "A": [[5.0, 6.0], [50.0, 7.0], last], "metrics": metrics}
    (run / "matrix.json").write_text(json.dumps(matrix))


def test_the_summary_holds_the_given_methods_with_hand_computed_means(tmp_path):
    script = load_script("render-results")
    write_run(tmp_path, "codyra", 0, [40.0, 60.0], 10.0)
    write_run(tmp_path, "codyra", 1, [50.0, 70.0], 4.0)
    write_run(tmp_path, "other-grid-method", 0, [90.0, 90.0], 0.0)
    page = "\n".join(script.render(tmp_path, "mini", None, [], methods=["codyra"]))
    # Last: (50 + 60) / 2 = 55 ± stdev(50, 60) = 7.1; Forgetting 7.0 ± 4.2; gains A[j+1][j] - A[0][j]:
    # a: 50 - 5 = 45, b: (60 + 70) / 2 - 6 = 59
    assert "| codyra (2) | 10.0 ± 0.0 | 20.0 ± 0.0 | 55.0 ± 7.1 | 7.0 ± 4.2 | +45.0 | +59.0 |" in page
    assert "other-grid-method" not in page
    assert page.startswith("# Measured: `mini`\n")
    ablations = Path("config/mini_ablations.yaml")
    titled = script.render(tmp_path, "mini", None, [], methods=["codyra"], configfile=ablations)
    assert titled[0] == "# Measured: `mini`, `config/mini_ablations.yaml`"  # one benchmark, several grids
    with pytest.raises(SystemExit, match="for lora-r16: run the config's grid first"):
        script.load_runs(tmp_path, ["codyra", "lora-r16"])


def test_a_rerendered_page_lists_the_rows_that_changed_and_why(tmp_path):
    script = load_script("render-results")
    results, page = tmp_path / "results", tmp_path / "mini.md"
    write_run(results / "mini", "codyra", 0, [40.0, 60.0], 10.0)
    write_run(results / "mini", "l2p", 0, [20.0, 30.0], 5.0)
    write_run(results / "mini", "gone", 0, [20.0, 30.0], 5.0)
    assert script.main([str(results), "mini", "--out", str(page)]) == 0
    (results / "mini" / "gone").rename(results / "mini" / "new")
    (results / "mini" / "l2p").rename(tmp_path / "old-l2p")
    write_run(results / "mini", "l2p", 0, [30.0, 40.0], 2.0)  # Last 25 -> 35, Forgetting 5 -> 2
    why = "l2p: the reference's lr per 256 images"
    assert script.main([str(results), "mini", "--out", str(page), "--since", str(page), "--why", why]) == 0
    text = page.read_text()
    head = text.split("## Summary")[0]
    assert "## Changes since the rendering of " in head and f"- {why}" in head
    assert "- `l2p` (Transfer, Average, Last, Forgetting): 10.0 | 20.0 | 25.0 | 5.0 → 10.0 | 20.0 | 35.0 | 2.0" in head
    assert "- `new`: new" in head and "- `gone`: gone" in head
    assert "- 1 of the 3 methods reproduce their previous row exactly." in head  # codyra
    assert script.summary_rows(text)["l2p"][:4] == ["10.0", "20.0", "35.0", "2.0"]
    with pytest.raises(SystemExit):
        script.main([str(results), "mini", "--why", why])  # a reason needs the page it explains


def test_an_analysis_appends_its_tables_and_copies_its_figures(tmp_path):
    script = load_script("render-results")
    cfg = {**load_config(ABLATIONS), "results": str(tmp_path / "results")}
    tables, figures = outputs(cfg, "ablations")
    page = tmp_path / "docs" / "mini-ablations.md"
    with pytest.raises(SystemExit, match="missing: run the config's `paper` target first"):
        script.analysis_sections(cfg, ["ablations"], page)
    tables_dir(cfg).mkdir(parents=True)
    figures_dir(cfg).mkdir(parents=True)
    for name in tables:
        (tables_dir(cfg) / f"{name}.md").write_text(f"**{name}**\n\n| | x |\n|---|---|\n| row | 1.0 |\n")
    for stem in figures:
        (figures_dir(cfg) / f"{stem}.png").write_bytes(stem.encode())
    lines = script.analysis_sections(cfg, ["ablations"], page)
    text = "\n".join(lines)
    assert "## Analysis `ablations`" in text
    assert all(f"**{name}**" in text for name in tables)
    for stem in figures:
        assert f"![{stem}](mini-ablations/{stem}.png)" in text
        assert (page.parent / "mini-ablations" / f"{stem}.png").read_bytes() == stem.encode()
    assert "ablation_kappa_max" in tables and "ablation_kappa_max" in figures
    with pytest.raises(SystemExit, match="analysis 'ablations' does not apply to this config"):
        script.analysis_sections({**cfg, "ablations": {}}, ["ablations"], page)


def test_every_analysis_is_checked_before_a_figure_is_copied(tmp_path):
    script = load_script("render-results")
    cfg = {**load_config(ABLATIONS), "results": str(tmp_path / "results")}
    tables, figures = outputs(cfg, "ablations")
    tables_dir(cfg).mkdir(parents=True)
    figures_dir(cfg).mkdir(parents=True)
    for name in tables:
        (tables_dir(cfg) / f"{name}.md").write_text(f"**{name}**\n")
    for stem in figures:
        (figures_dir(cfg) / f"{stem}.png").write_bytes(b"png")
    page = tmp_path / "docs" / "mini-ablations.md"
    with pytest.raises(SystemExit, match="analysis 'no-such', 'other' does not apply to this config; it has: "):
        script.analysis_sections(cfg, ["ablations", "no-such", "other"], page)
    with pytest.raises(SystemExit, match="analysis single_task: .* missing"):  # ablations' files are all there
        script.analysis_sections(cfg, ["ablations", "single_task"], page)
    assert not page.with_suffix("").exists()


def test_a_named_table_is_appended_and_a_missing_one_named(tmp_path):
    script = load_script("render-results")
    cfg = {**load_config(Path(ROOT) / "config" / "mini_blip.yaml"), "results": str(tmp_path / "results")}
    page = tmp_path / "docs" / "mini-blip.md"
    with pytest.raises(SystemExit, match=r"--table: .*blip\.md missing"):
        script.output_files(cfg, ["blip"], [], "--table")
    tables_dir(cfg).mkdir(parents=True)
    (tables_dir(cfg) / "blip.md").write_text("**mini-blip: Averaged performance using BLIP**\n")
    assert script.copied_files(script.output_files(cfg, ["blip"], [], "--table"), page) == [
        "\n**mini-blip: Averaged performance using BLIP**"
    ]
    assert not page.with_suffix("").exists()  # no figure, no folder


def test_a_named_figure_is_copied_beside_the_page_and_embedded(tmp_path):
    script = load_script("render-results")
    config = Path(ROOT) / "config" / "config.yaml"
    results, page = tmp_path / "results", tmp_path / "docs" / "mini.md"
    cfg = {**load_config(config), "results": str(results)}
    for method in cfg["methods"]:
        write_run(results / "mini", method, 0, [40.0, 60.0], 10.0)
    args = [str(results), "mini", "--configfile", str(config), "--out", str(page)]
    figure = ["--figure", "comparison_last_forgetting"]
    with pytest.raises(SystemExit, match=r"--figure: .*comparison_last_forgetting\.png missing"):
        script.main(args + figure)
    with pytest.raises(SystemExit):
        script.main([str(results), "mini", *figure])  # a figure goes beside a page of a config's grid
    figures_dir(cfg).mkdir(parents=True)
    (figures_dir(cfg) / "comparison_last_forgetting.png").write_bytes(b"png")
    assert script.main(args + figure) == 0
    assert "## Figures\n\n![comparison_last_forgetting](mini/comparison_last_forgetting.png)" in page.read_text()
    assert (page.parent / "mini" / "comparison_last_forgetting.png").read_bytes() == b"png"
