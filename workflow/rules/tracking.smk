# MLflow: the store, experiment and parent runs exist before parallel jobs start (a fresh
# SQLite store opened by several writers at once races on its schema migrations).


localrules:
    mlflow_init,


rule mlflow_init:
    # claims no core: a few seconds of bookkeeping that runs beside the mini's pretraining (whose
    # imports and corpus take one core for their first seconds) instead of after it, where every
    # job waits for it
    threads: 0
    output:
        MLFLOW_MARKER,
    params:
        # what init_store uses, nothing else (docs/architecture-snakemake.md, "The MLflow marker")
        store=fingerprint(CFG["tracking"]),
    log:
        f"{LOGS}/mlflow_init.log",
    run:
        codyra_cli(log[0], "mlflow-init", "--marker", output[0])
