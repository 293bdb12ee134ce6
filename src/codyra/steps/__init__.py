"""The pure parts of an optimizer step, below every layer that trains: batches and random streams
as functions of (seed, task, step), AdamW parameter groups and the carried AdamW state, and the
learning-rate schedules. The training loop, the families' sessions, the methods and the minis'
pretraining share them; none of them imports anything of codyra."""
