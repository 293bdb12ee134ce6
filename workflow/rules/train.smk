# Training task i of a (method, seed) starts from the merged updates of tasks 1..i-1.


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
        settings=lambda w: train_fingerprint(CFG, w.method, int(w.i), CLASSES[w.method]),
    threads: lambda w: job_threads(CFG, train_rule(CFG), w.method, int(w.i), REQUESTS.gpus(train_rule(CFG)), CLASSES[w.method])
    group:
        JOB_GROUP
    log:
        f"{LOGS}/train/{{method}}/seed{{seed}}/task{{i}}.log",
    run:
        codyra_cli(log[0], "train", "--method", wildcards.method, "--seed", wildcards.seed, "--task", wildcards.i)
