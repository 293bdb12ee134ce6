# Cells A[i,j]: one job each. Row 0 (the pretrained model) is evaluated once per benchmark;
# every (method, seed) gets a copy, and so does every row of a method that never trains.


rule row0_cell:
    input:
        unpack(lambda w: common_inputs()),
    output:
        ROW0_PATTERN,
    params:
        settings=lambda w: eval_fingerprint(CFG, int(w.j)),
    threads: CFG["eval"]["threads"]
    log:
        f"{LOGS}/cells/pretrained/A_0_{{j}}.log",
    run:
        codyra_cli(log[0], threads, "cell", "pretrained", 0, 0, wildcards.j)


localrules:
    share_row0,


rule share_row0:
    input:
        ROW0_PATTERN,
    output:
        f"{RUN}/cells/A_0_{{j}}.json",
    log:
        f"{LOGS}/cells/{{method}}/seed{{seed}}/A_0_{{j}}.log",
    run:
        codyra_cli(log[0], threads, "cell", wildcards.method, wildcards.seed, 0, wildcards.j)


def cell_inputs(w):
    inputs = common_inputs()
    if trains(w.method):
        # the update files too: a cell reads them, and a changed one must rerun the cell
        inputs["updates"] = [run_path(w.method, w.seed, f"task{k}", f) for k in range(1, int(w.i) + 1) for f in ("summary.json", "update.safetensors")]
    else:
        inputs["row0"] = ROW0_PATTERN.format(j=w.j)
    return inputs


rule eval_cell:
    input:
        unpack(cell_inputs),
    output:
        CELL_PATTERN,
    wildcard_constraints:
        i=r"[1-9]\d*",
    params:
        settings=lambda w: eval_fingerprint(CFG, int(w.j)),
    threads: CFG["eval"]["threads"]
    log:
        f"{LOGS}/cells/{{method}}/seed{{seed}}/A_{{i}}_{{j}}.log",
    run:
        codyra_cli(log[0], threads, "cell", wildcards.method, wildcards.seed, wildcards.i, wildcards.j)
