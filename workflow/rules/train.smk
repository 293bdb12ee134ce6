# Training task i of a (method, seed) starts from the merged updates of tasks 1..i-1.


def train_inputs(w):
    inputs = common_inputs()
    i = int(w.i)
    if i > 1:
        inputs["previous"] = run_path(w.method, w.seed, f"task{i - 1}", "summary.json")
    return inputs


def train_settings(w):
    """Everything that determines task i's update: a change reruns exactly the affected jobs."""
    i = int(w.i)
    return fingerprint(
        {
            "job": resolve_job(CFG, w.method, i),
            "task": CFG["tasks"][i - 1]["name"],
            "model": CFG["model"],
            "data": CFG["data"],
            "mini": CFG["mini"] if PRETRAINED_WEIGHTS else None,
            "family": family_settings(),
            "version": version_tag(),
        }
    )


rule:
    # LLM training gets its own rule name: profiles give it 4 GPUs in one task
    name:
        "train_lm_task" if CFG["model"]["family"] == "causal_lm" else "train_task"
    input:
        unpack(train_inputs),
    output:
        factors=f"{RUN}/task{{i}}/update.safetensors",
        summary=f"{RUN}/task{{i}}/summary.json",
        history=f"{RUN}/task{{i}}/history.jsonl",
    params:
        settings=train_settings,
    threads: lambda w: resolve_job(CFG, w.method, int(w.i))["train"]["threads"]
    group:
        TASK_GROUP
    log:
        f"{LOGS}/train/{{method}}/seed{{seed}}/task{{i}}.log",
    run:
        codyra_cli(log[0], "train", "--method", wildcards.method, "--seed", wildcards.seed, "--task", wildcards.i, threads=threads)
