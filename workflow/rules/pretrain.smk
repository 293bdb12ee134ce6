# The mini benchmarks' theta_0: a tiny CLIP pretrained on synthetic captioned scenes, or
# (mini TRACE) the synthetic task data, a tokenizer and a tiny LLaMA.


if PRETRAINED_WEIGHTS:

    rule pretrain_mini:
        output:
            PRETRAINED_WEIGHTS,
        params:
            settings=pretrain_fingerprint(CFG),
        threads: CFG["mini"]["pretrain_threads"]
        log:
            f"{LOGS}/pretrain_mini.log",
        run:
            codyra_cli(log[0], "pretrain-mini")
