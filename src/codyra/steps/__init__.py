"""The parts of an optimizer step, below every layer that trains: batches and random streams as
functions of (seed, task, step), AdamW parameter groups and the carried AdamW state, the
learning-rate schedules, and the backend that runs a step in one process. The training loop,
the families' sessions, the methods and the minis' pretraining share them."""
