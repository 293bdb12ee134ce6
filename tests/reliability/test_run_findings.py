"""What a finished run says at its end: the headline table, where the tables are, the MLflow links."""

from __future__ import annotations

from codyra.store.paths import figures_dir, tables_dir
from codyra.tracking.findings import HEADLINE_TABLE, findings
from codyra.tracking.mirror import Store, tracking_uri

TABLE = """**tiny: Forgetting (paper; lower is better), BWT (TreeLoRA; higher is better) and means (%)**

| | Forgetting | BWT | OP | Transfer | Average | Last |
|---|---|---|---|---|---|---|
| CoDyRA | 12.5 ± 0.0 | −8.3 ± 0.0 | 81.7 ± 0.0 | 19.0 ± 0.0 | 61.2 ± 0.0 | 81.7 ± 0.0 |
"""


def tracked(cfg: dict, enabled: bool = True) -> dict:
    return {**cfg, "tracking": {**cfg["tracking"], "enabled": enabled, "uri": None}}


def test_a_run_ends_with_its_headline_table_where_the_tables_are_and_the_links(tiny_cfg):
    cfg = tracked(tiny_cfg)
    assert "No tables of tiny yet: `snakemake all_tables` writes them" in findings(cfg)
    (tables_dir(cfg) / f"{HEADLINE_TABLE}.md").parent.mkdir(parents=True)
    (tables_dir(cfg) / f"{HEADLINE_TABLE}.md").write_text(TABLE)
    said = findings(cfg)
    assert TABLE.strip() in said and f"{tables_dir(cfg)}/forgetting.md" in said.splitlines()[0]
    assert f"Tables: {tables_dir(cfg)}/" in said
    assert f"figures (heatmaps, the methods compared): {figures_dir(cfg)}/" in said
    # no store yet: it is not created here, and the fix is named
    assert "holds no experiment codyra/tiny or does not answer; `codyra sync-mlflow" in said
    assert not (tables_dir(cfg).parents[1] / "mlflow.db").exists()

    experiment = Store(cfg).experiment_id
    lines = findings(cfg).splitlines()
    serve = lines.index("MLflow (serve it, then open the links):") + 1
    assert lines[serve].split() == [
        *("mlflow", "ui", "--backend-store-uri", tracking_uri(cfg), "--artifacts-destination"),
        *(f"{tables_dir(cfg).parents[1]}/mlartifacts", "--host", "127.0.0.1", "--port", "5000"),
    ]
    base = f"http://127.0.0.1:5000/#/experiments/{experiment}/runs?workflowType=machine_learning"
    assert lines[serve + 1].split()[-1] == f"{base}&viewStateShareKey=summary"
    assert lines[serve + 2].split()[-1] == f"{base}&viewStateShareKey=curves&compareRunsMode=CHART"

    assert "MLflow" not in findings(tracked(tiny_cfg, enabled=False))  # tracking off: no link
    server = {**cfg, "tracking": {"enabled": True, "uri": "http://127.0.0.1:9"}}  # nothing listens there
    assert "MLflow: http://127.0.0.1:9 holds no experiment codyra/tiny or does not answer" in findings(server)
