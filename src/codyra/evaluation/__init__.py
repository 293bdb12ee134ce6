"""Evaluation: cells A[i, j] of a row (routed inference for methods that predict each sample's
domain included), held-out accuracy, a run's matrix and metrics, and the paper's tables."""
