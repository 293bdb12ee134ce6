# Per-run matrices and the paper's tables (whose job also fills in MLflow, best-effort).
from codyra.tables import table_names


rule summarize_run:
    input:
        [run_path("{method}", "{seed}", "cells", f"A_{i}_{j}.json") for i in range(N + 1) for j in TASKS],
    output:
        matrix=f"{RUN}/matrix.json",
        heatmap=f"{RUN}/A_heatmap.png",
    log:
        f"{LOGS}/summarize/{{method}}/seed{{seed}}.log",
    run:
        codyra_cli(log[0], "summarize", "--method", wildcards.method, "--seed", wildcards.seed)


rule tables:
    input:
        [run_path(m, s, "matrix.json") for m in CFG["methods"] for s in CFG["seeds"]],
    output:
        [f"{TABLES}/{name}.{ext}" for name in table_names(CFG) for ext in ("md", "csv", "tex")],
    log:
        f"{LOGS}/tables.log",
    run:
        codyra_cli(log[0], "tables")


localrules:
    summarize_run,
    tables,
