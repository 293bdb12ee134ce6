# MLflow: the store, experiment and parent runs exist before parallel jobs start (a fresh
# SQLite store opened by several writers at once races on its schema migrations).


localrules:
    mlflow_init,


rule mlflow_init:
    output:
        MLFLOW_MARKER,
    params:
        # What init_store uses, nothing else. Every model job reads the marker as an ancient
        # input, and when the marker must be remade Snakemake 9.27 schedules it alone: jobs below
        # a rerun job are masked from their own checks (missing outputs included), then skipped
        # because their only link to it is ancient (dag.py, update_needrun). A fingerprint of
        # the methods and seeds therefore made every grid that adds a method stop after this job;
        # a changed tracking setting still does, once (the next invocation goes on).
        store=fingerprint(CFG["tracking"]),
    log:
        f"{LOGS}/mlflow_init.log",
    run:
        codyra_cli(log[0], "mlflow-init", "--marker", output[0])
