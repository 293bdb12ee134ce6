# Held-out tasks (config key heldout_tasks): theta_i of every run on tasks no run trains on,
# one job per (method, seed, i) writing one file per held-out task. theta_0's accuracies are
# computed once per benchmark and copied, as are all rows of a method that never trains.
from codyra.experiment.fingerprints import heldout_fingerprint
from codyra.store.paths import HELDOUT, ROW0_HELDOUT

HELDOUT_TASKS = CFG["heldout_tasks"]
HELDOUT_PATTERN = HELDOUT.format(**_fixed, method="{method}", seed="{seed}", i="{i}", name="{name}")
ROW0_HELDOUT_FILES = [ROW0_HELDOUT.format(**_fixed, name=name) for name in HELDOUT_TASKS]


rule heldout_row0:
    input:
        unpack(lambda w: {**common_inputs(), **cache_inputs(HELDOUT_TASKS)}),
    output:
        ROW0_HELDOUT_FILES,
    params:
        settings=heldout_fingerprint(CFG),
    threads: job_threads(CFG, "heldout_row0")
    log:
        f"{LOGS}/heldout/pretrained/H_0.log",
    run:
        codyra_cli(log[0], "heldout", "--method", "pretrained", "--i", 0)


HELDOUT_TRAINED = [m for m in CFG["methods"] if trains(m)]
HELDOUT_COPIED = [m for m in CFG["methods"] if not trains(m)]
HELDOUT_ROW = [HELDOUT_PATTERN.replace("{name}", name) for name in HELDOUT_TASKS]  # row {i}'s files


# Row 0 of every run, and every row of a method that never trains, is a copy of theta_0's
# files: a local job (never queued).
localrules:
    share_heldout_row0,


rule share_heldout_row0:
    input:
        ROW0_HELDOUT_FILES,
    output:
        [f.replace("{i}", "0") for f in HELDOUT_ROW],
    log:
        f"{LOGS}/heldout/{{method}}/seed{{seed}}/H_0.log",
    run:
        codyra_cli(log[0], "heldout", "--method", wildcards.method, "--seed", wildcards.seed, "--i", 0)


if HELDOUT_COPIED:

    localrules:
        copy_heldout_row0,

    rule copy_heldout_row0:
        input:
            ROW0_HELDOUT_FILES,
        output:
            HELDOUT_ROW,
        wildcard_constraints:
            method="|".join(HELDOUT_COPIED),
            i=r"[1-9]\d*",
        log:
            f"{LOGS}/heldout/{{method}}/seed{{seed}}/H_{{i}}.log",
        run:
            codyra_cli(log[0], "heldout", "--method", wildcards.method, "--seed", wildcards.seed, "--i", wildcards.i)


if HELDOUT_TRAINED:

    rule heldout:
        input:
            unpack(lambda w: {**common_inputs(), **cache_inputs(HELDOUT_TASKS), "updates": theta_inputs(w.method, w.seed, w.i)}),
        output:
            HELDOUT_ROW,
        wildcard_constraints:
            method="|".join(HELDOUT_TRAINED),
            i=r"[1-9]\d*",
        params:
            settings=heldout_fingerprint(CFG),
        threads: job_threads(CFG, "heldout")
        group:
            JOB_GROUP  # on a cluster, in the job of its run (or task), like the row of cells it extends
        log:
            f"{LOGS}/heldout/{{method}}/seed{{seed}}/H_{{i}}.log",
        run:
            codyra_cli(log[0], "heldout", "--method", wildcards.method, "--seed", wildcards.seed, "--i", wildcards.i)


localrules:
    all_heldout,


rule all_heldout:
    input:
        [
            HELDOUT_PATTERN.format(method=m, seed=s, i=i, name=name)
            for m in CFG["methods"]
            for s in CFG["seeds"]
            for i in range(N + 1)
            for name in HELDOUT_TASKS
        ],
