# Per-run matrices and the paper's tables (whose job also fills in MLflow, best-effort).
# Tables, heatmaps and matrices are report() results of `snakemake --report`: one category per
# benchmark, inside it the tables and one subcategory per method (labels: seed, result).
from codyra.evaluation.tables import table_names
from codyra.experiment.jobs import method_kinds

TABLE_FORMATS = ("md", "csv", "tex", "html")


def run_result(path, caption, kind):
    return report(path, caption=caption, category=BENCHMARK, subcategory="{method}", labels={"seed": "{seed}", "result": kind})


def table_result(name, ext):
    path = f"{TABLES}/{name}.{ext}"
    if ext != "html":  # the report shows each table once, rendered; the other formats sit next to it
        return path
    return report(path, caption="../report/table.rst", category=BENCHMARK, subcategory="tables", labels={"table": name})


rule summarize_run:
    input:
        [run_path("{method}", "{seed}", "cells", f"A_{i}_{j}.json") for i in range(N + 1) for j in TASKS],
    output:
        matrix=run_result(f"{RUN}/matrix.json", "../report/matrix.rst", "matrix (JSON)"),
        heatmap=run_result(f"{RUN}/A_heatmap.png", "../report/heatmap.rst", "heatmap"),
    params:
        version=lambda w: job_version("summarize_run", method_kinds(CFG, [w.method])),
    log:
        f"{LOGS}/summarize/{{method}}/seed{{seed}}.log",
    run:
        codyra_cli(log[0], "summarize", "--method", wildcards.method, "--seed", wildcards.seed)


rule tables:
    input:
        [run_path(m, s, "matrix.json") for m in CFG["methods"] for s in CFG["seeds"]],
    output:
        [table_result(name, ext) for name in table_names(CFG) for ext in TABLE_FORMATS],
    params:
        version=job_version("tables", method_kinds(CFG, CFG["methods"])),
    log:
        f"{LOGS}/tables.log",
    run:
        codyra_cli(log[0], "tables")


localrules:
    summarize_run,
    tables,
