"""The training loop: one task of one method and seed, from theta_{i-1} to its stored update,
with the method's hooks, checkpoints and resume. It knows no result paths or MLflow: the job
(:mod:`codyra.experiment.train_job`) hands it a resolved task and a log."""
