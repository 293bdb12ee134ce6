# Training task i of a (method, seed) starts from the merged updates of tasks 1..i-1.
from codyra.methods.lora import norm_references


def train_inputs(w):
    inputs = common_inputs()
    i = int(w.i)
    # the norm-matched probe's target is the median ||dW||_F of these methods' updates of task i
    references = norm_references(resolve_job(CFG, w.method, i)["method"])
    if references:
        inputs["norm_references"] = [run_path(m, w.seed, f"task{i}", "summary.json") for m in references]
    if i > 1:
        inputs["previous"] = run_path(w.method, w.seed, f"task{i - 1}", "summary.json")
        # theta_{i-1} is rebuilt from the update files 1..i-1: a changed one must rerun this job
        inputs["updates"] = [run_path(w.method, w.seed, f"task{k}", "update.safetensors") for k in range(1, i)]
    return inputs


rule:
    # the family names the rule (Family.train_rule): profiles give LLM training 4 GPUs in one task
    name:
        train_rule(CFG)
    input:
        unpack(train_inputs),
    output:
        factors=f"{RUN}/task{{i}}/update.safetensors",
        summary=f"{RUN}/task{{i}}/summary.json",
        history=f"{RUN}/task{{i}}/history.jsonl",
    params:
        settings=lambda w: train_fingerprint(CFG, w.method, int(w.i)),
    threads: lambda w: resolve_job(CFG, w.method, int(w.i))["train"]["threads"]
    group:
        JOB_GROUP
    log:
        f"{LOGS}/train/{{method}}/seed{{seed}}/task{{i}}.log",
    run:
        codyra_cli(log[0], "train", "--method", wildcards.method, "--seed", wildcards.seed, "--task", wildcards.i, threads=threads)
