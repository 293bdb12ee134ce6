# Held-out tasks (config key heldout_tasks): theta_i of every run on tasks no run trains on,
# one job per (method, seed, i) writing one file per held-out task. theta_0's accuracies are
# computed once per benchmark and copied, as are all rows of a method that never trains.
from codyra.fingerprints import heldout_fingerprint
from codyra.paths import HELDOUT, ROW0_HELDOUT

HELDOUT_TASKS = CFG["heldout_tasks"]
HELDOUT_PATTERN = HELDOUT.format(**_fixed, method="{method}", seed="{seed}", i="{i}", name="{name}")
ROW0_HELDOUT_FILES = [ROW0_HELDOUT.format(**_fixed, name=name) for name in HELDOUT_TASKS]


rule heldout_row0:
    input:
        unpack(lambda w: common_inputs()),
    output:
        ROW0_HELDOUT_FILES,
    params:
        settings=heldout_fingerprint(CFG),
    threads: CFG["eval"]["threads"]
    log:
        f"{LOGS}/heldout/pretrained/H_0.log",
    run:
        codyra_cli(log[0], "heldout", "--method", "pretrained", "--i", 0, threads=threads)


def heldout_inputs(w):
    inputs = common_inputs()
    if trains(w.method) and int(w.i) > 0:
        inputs["updates"] = [run_path(w.method, w.seed, f"task{k}", f) for k in range(1, int(w.i) + 1) for f in ("summary.json", "update.safetensors")]
    else:
        inputs["row0"] = ROW0_HELDOUT_FILES
    return inputs


rule heldout:
    input:
        unpack(heldout_inputs),
    output:
        [HELDOUT_PATTERN.replace("{name}", name) for name in HELDOUT_TASKS],
    params:
        settings=heldout_fingerprint(CFG),
    threads: CFG["eval"]["threads"]
    log:
        f"{LOGS}/heldout/{{method}}/seed{{seed}}/H_{{i}}.log",
    run:
        codyra_cli(log[0], "heldout", "--method", wildcards.method, "--seed", wildcards.seed, "--i", wildcards.i, threads=threads)


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
