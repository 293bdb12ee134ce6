"""Experiment plumbing: the config and its schema, ablation sweeps, settings fingerprints, code
versions, the table of jobs the workflow and the SLURM launcher share, the training job, and the
minis' own pretraining job."""
