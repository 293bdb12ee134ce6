# Cells A[i,j]: one job each. Row 0 (the pretrained model) is evaluated once per benchmark;
# every (method, seed) gets a copy, and so does every row of a method that never trains.


def eval_settings(j):
    union = CFG["data"]["label_space"] == "union"
    tasks = [t["name"] for t in CFG["tasks"]] if union else CFG["tasks"][int(j) - 1]["name"]
    return fingerprint([CFG["eval"], CFG["data"], CFG["model"], family_settings(), tasks, version_tag()])


rule row0_cell:
    input:
        unpack(lambda w: common_inputs()),
    output:
        ROW0_PATTERN,
    params:
        settings=lambda w: eval_settings(w.j),
    threads: CFG["eval"]["threads"]
    log:
        f"{LOGS}/cells/pretrained/A_0_{{j}}.log",
    run:
        codyra_cli(log[0], "cell", "--method", "pretrained", "--i", 0, "--j", wildcards.j, threads=threads)


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
        codyra_cli(log[0], "cell", "--method", wildcards.method, "--seed", wildcards.seed, "--i", 0, "--j", wildcards.j)


def cell_inputs(w):
    inputs = common_inputs()
    if trains(w.method):
        inputs["updates"] = [run_path(w.method, w.seed, f"task{k}", "summary.json") for k in range(1, int(w.i) + 1)]
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
        settings=lambda w: eval_settings(w.j),
    threads: CFG["eval"]["threads"]
    log:
        f"{LOGS}/cells/{{method}}/seed{{seed}}/A_{{i}}_{{j}}.log",
    run:
        codyra_cli(log[0], "cell", "--method", wildcards.method, "--seed", wildcards.seed, "--i", wildcards.i, "--j", wildcards.j, threads=threads)
