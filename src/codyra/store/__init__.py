"""Stored results: their paths, atomic writes, task updates and their merge, training
checkpoints, cell files, theta_i rebuilt from theta_0 and the updates, and theta_0's digest.
Imports nothing of codyra but its errors."""
