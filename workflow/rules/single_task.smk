# The single-task studies (config key single_task; codyra.experiment.single_task): each run trains
# ONE task from theta_0 and is evaluated on it and on the reference tasks. The studies' runs on a
# task form a config of their own (benchmark <benchmark>-single-<task>, the wildcard {target}),
# run by the ordinary commands: `codyra train` (task 1), `codyra cell` (A[0,1], A[1,1]),
# `codyra heldout` (H_0, H_1 of the reference tasks) and `codyra probe` (module removal), each
# given that config. The analysis single_task (analysis.smk) reads their files.
import re

from codyra.analysis.probe_files import probe_names
from codyra.experiment.jobs import method_kinds
from codyra.experiment.validation import single_task_config
from codyra.experiment.single_task import INFIX, removal_methods, targets
from codyra.store.paths import HELDOUT, PROBE

SINGLE = {t: single_task_config(CFG, t) for t in targets(CFG)}
SINGLE_CLASSES = {t: method_classes(cfg, cfg["methods"]) for t, cfg in SINGLE.items()}  # each study's, looked up once
REFERENCES = CFG["single_task"]["reference_tasks"]
PROBED = {t: removal_methods(CFG, t) for t in SINGLE}  # the runs the module-removal probe takes apart
_single = dict(results=RESULTS, benchmark=f"{BENCHMARK}{INFIX}{{target}}")
SINGLE_RUN = RUN_DIR.format(**_single, method="{method}", seed="{seed}")
SINGLE_GROUP = "single-{target}-{method}-seed{seed}"  # on a cluster, a run's training, evaluation and probe: one job
SINGLE_LOGS = f"{LOGS}/single_task/{{target}}"
SINGLE_METHODS = "|".join(map(re.escape, dict.fromkeys(m for cfg in SINGLE.values() for m in cfg["methods"])))


SINGLE_TASK_FILES = [f for t, cfg in SINGLE.items() for m in cfg["methods"] for s in CFG["seeds"] for f in single_files(t, m, s)]


if SINGLE:

    wildcard_constraints:
        target="|".join(map(re.escape, SINGLE)),

    rule single_task_row0:
        # theta_0 on the task (A[0,1]) and on the reference tasks (H_0), once per task
        input:
            unpack(lambda w: {**common_inputs(), **cache_inputs([w.target, *REFERENCES])}),
        output:
            [ROW0_CELL.format(**_single, j=1)] + [ROW0_HELDOUT.format(**_single, name=h) for h in REFERENCES],
        params:
            settings=lambda w: fingerprint([eval_fingerprint(SINGLE[w.target], 1), heldout_fingerprint(SINGLE[w.target])]),
        threads: job_threads(CFG, "single_task_row0")
        log:
            f"{SINGLE_LOGS}/pretrained.log",
        run:
            for command in ("cell", "heldout"):
                codyra_cli(log[0], command, "--method", "pretrained", "--i", 0, cfg=SINGLE[wildcards.target])

    rule single_task_train:
        wildcard_constraints:
            method=SINGLE_METHODS,
        input:
            unpack(single_train_inputs),
        output:
            factors=f"{SINGLE_RUN}/task1/update.safetensors",
            summary=f"{SINGLE_RUN}/task1/summary.json",
            history=f"{SINGLE_RUN}/task1/history.jsonl",
        params:
            settings=lambda w: train_fingerprint(SINGLE[w.target], w.method, 1, SINGLE_CLASSES[w.target][w.method]),
        threads: lambda w: job_threads(SINGLE[w.target], "single_task_train", w.method, 1, method_class=SINGLE_CLASSES[w.target][w.method])
        group:
            SINGLE_GROUP
        log:
            f"{SINGLE_LOGS}/{{method}}/seed{{seed}}/train.log",
        run:
            codyra_cli(log[0], "train", "--method", wildcards.method, "--seed", wildcards.seed, "--task", 1, cfg=SINGLE[wildcards.target])

    rule single_task_eval:
        wildcard_constraints:
            method=SINGLE_METHODS,
        # theta_1 on the task (A[1,1]) and the reference tasks (H_1); row 0's files copied beside them
        input:
            unpack(lambda w: {**common_inputs(), **cache_inputs([w.target, *REFERENCES]), "updates": single_update(w), "row0": single_row0(w)}),
        output:
            [f"{SINGLE_RUN}/cells/A_{i}_1.json" for i in (0, 1)]
            + [HELDOUT.format(**_single, method="{method}", seed="{seed}", i=i, name=h) for i in (0, 1) for h in REFERENCES],
        params:
            settings=lambda w: fingerprint([eval_fingerprint(SINGLE[w.target], 1), heldout_fingerprint(SINGLE[w.target])]),
        threads: job_threads(CFG, "single_task_eval")
        group:
            SINGLE_GROUP
        log:
            f"{SINGLE_LOGS}/{{method}}/seed{{seed}}/eval.log",
        run:
            for i in (0, 1):
                for command in ("cell", "heldout"):
                    codyra_cli(log[0], command, "--method", wildcards.method, "--seed", wildcards.seed, "--i", i, cfg=SINGLE[wildcards.target])

    SINGLE_PROBES = probe_names(next(iter(SINGLE.values())))  # every task's runs take every study's removals

    if SINGLE_PROBES:

        rule single_task_probe:
            wildcard_constraints:
                method=SINGLE_METHODS,
            # theta_1 without each removed module type, on the task and the reference tasks
            input:
                unpack(lambda w: {**common_inputs(), "updates": single_update(w)}),
            output:
                [PROBE.format(**_single, method="{method}", seed="{seed}", probe=p) for p in SINGLE_PROBES],
            params:
                settings=lambda w: fingerprint([heldout_fingerprint(SINGLE[w.target]), eval_fingerprint(SINGLE[w.target], 1), SINGLE[w.target]["analysis"]]),
                version=lambda w: job_version("probe", method_kinds(SINGLE[w.target], [w.method])),
            threads: job_threads(CFG, "single_task_probe")
            group:
                SINGLE_GROUP
            log:
                f"{SINGLE_LOGS}/{{method}}/seed{{seed}}/probe.log",
            run:
                codyra_cli(log[0], "probe", "--method", wildcards.method, "--seed", wildcards.seed, cfg=SINGLE[wildcards.target])
