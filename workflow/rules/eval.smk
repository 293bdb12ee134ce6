# Cells A[i,j]. A job evaluates a whole row: theta_i is built once and scores every task j.
# Row 0 (the pretrained model) is evaluated once per benchmark; every (method, seed) gets a
# copy, and so does every row of a method that never trains (unless it rewrites the prompts,
# FIX(ICL): its rows are evaluated on theta_0, with no update): copies are local jobs.
# On a cluster, the training tasks and rows of a run form group jobs (JOB_GROUP, common.smk: one
# SLURM job per CLIP run); an LM's row is a 1-GPU job of its own beside its task's 4-GPU training
# (ROW_GROUP); a local run ignores groups.

EVALUATED = [m for m in CFG["methods"] if not copies_row0(m)]
COPIED = [m for m in CFG["methods"] if copies_row0(m)]


if CACHED:

    rule eval_cache:
        output:
            images=f"{eval_cache_dir(CFG, '{dataset}')}/{EVAL_CACHE_IMAGES}",
            manifest=f"{eval_cache_dir(CFG, '{dataset}')}/{EVAL_CACHE_MANIFEST}",
        wildcard_constraints:
            dataset="|".join(CACHED),
        params:
            settings=lambda w: eval_cache_fingerprint(CFG, w.dataset),
        threads: job_threads(CFG, "eval_cache")
        log:
            f"{LOGS}/eval_cache/{{dataset}}.log",
        run:
            codyra_cli(log[0], "eval-cache", "--dataset", wildcards.dataset)


rule eval_row0:
    input:
        unpack(lambda w: {**common_inputs(), **cache_inputs(TASK_NAMES)}),
    output:
        ROW0_FILES,
    params:
        settings=eval_settings(),
    threads: job_threads(CFG, "eval_row0")
    log:
        f"{LOGS}/cells/pretrained/row0.log",
    run:
        codyra_cli(log[0], "cell", "--method", "pretrained", "--i", 0)


localrules:
    share_row0,


rule share_row0:
    input:
        ROW0_FILES,
    output:
        [CELL_PATTERN.format(method="{method}", seed="{seed}", i=0, j=j) for j in TASKS],
    log:
        f"{LOGS}/cells/{{method}}/seed{{seed}}/row0.log",
    run:
        codyra_cli(log[0], "cell", "--method", wildcards.method, "--seed", wildcards.seed, "--i", 0)


if COPIED:

    localrules:
        copy_row0,

    rule copy_row0:
        input:
            ROW0_FILES,
        output:
            [CELL_PATTERN.format(method="{method}", seed="{seed}", i="{i}", j=j) for j in TASKS],
        wildcard_constraints:
            method="|".join(COPIED),
            i=r"[1-9]\d*",
        log:
            f"{LOGS}/cells/{{method}}/seed{{seed}}/row{{i}}.log",
        run:
            codyra_cli(log[0], "cell", "--method", wildcards.method, "--seed", wildcards.seed, "--i", wildcards.i)


if EVALUATED:

    rule:
        # the family names the rule (Family.eval_rule): profiles give LLM generation its hours
        name:
            eval_rule(CFG)
        input:
            unpack(row_inputs),
        output:
            [CELL_PATTERN.format(method="{method}", seed="{seed}", i="{i}", j=j) for j in TASKS],
        wildcard_constraints:
            method="|".join(EVALUATED),
            i=r"[1-9]\d*",
        params:
            # an untrained row (FIX(ICL)) has no update inputs: its config's settings rerun it
            settings=lambda w: eval_settings() if trains(w.method) else [eval_settings(), *untrained_settings(CLASSES[w.method], CFG["method_configs"][w.method])],
        threads: job_threads(CFG, eval_rule(CFG))
        group:
            ROW_GROUP
        log:
            f"{LOGS}/cells/{{method}}/seed{{seed}}/row{{i}}.log",
        run:
            codyra_cli(log[0], "cell", "--method", wildcards.method, "--seed", wildcards.seed, "--i", wildcards.i)
