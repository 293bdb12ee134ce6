# Per-run matrices and the paper's tables (whose job also fills in MLflow, best-effort).
# Tables, figures and matrices are report() results of `snakemake --report`, in reading order
# (common.smk): one category per benchmark, inside it the paper's tables, the figures comparing the
# methods, and one subcategory per method (its mean heatmap and A table over seeds, its matrix per
# seed). Each run's own heatmap (PNG + PDF) stays in its run folder and on MLflow.
from codyra.evaluation.tables import SUMMARY_NAME, comparison_names, heatmap_names, table_names, wide_table_names
from codyra.experiment.jobs import method_kinds


rule summarize_run:
    input:
        [run_path("{method}", "{seed}", "cells", f"A_{i}_{j}.json") for i in range(N + 1) for j in TASKS],
    output:
        matrix=run_result(f"{RUN}/matrix.json", "../report/matrix.rst", "matrix (JSON)"),
        heatmap=f"{RUN}/A_heatmap.png",
        heatmap_vector=f"{RUN}/A_heatmap.pdf",
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
        [table_result(name, ext, place) for place, name in enumerate(table_names(CFG, CLASSES), 1) for ext in TABLE_FORMATS],
        [f"{TABLES}/{name}-wide.tex" for name in wide_table_names(CFG, CLASSES)],
        [heatmap_result(method, name) for method, name in zip(CFG["methods"], heatmap_names(CFG))],
        [comparison_result(name, place) for place, name in enumerate(comparison_names(CFG), 1)],
        [f"{FIGURES}/{name}.pdf" for name in heatmap_names(CFG) + comparison_names(CFG)],
        f"{TABLES}/{SUMMARY_NAME}",
    params:
        version=job_version("tables", method_kinds(CFG, CFG["methods"])),
    log:
        f"{LOGS}/tables.log",
    run:
        codyra_cli(log[0], "tables")


localrules:
    summarize_run,
    tables,
