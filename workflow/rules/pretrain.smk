# The mini benchmark's theta_0: a tiny CLIP pretrained on synthetic captioned scenes.


rule pretrain_mini:
    output:
        MINI_PRETRAINED.format(**_fixed),
    params:
        settings=fingerprint([CFG["mini"], CFG["model"], version_tag()]),
    threads: CFG["mini"]["pretrain_threads"]
    log:
        f"{LOGS}/pretrain_mini.log",
    run:
        codyra_cli(log[0], threads, "pretrain-mini")
