"""The paper's analyses beyond Table 1 (drift, update magnitude, rank activation, CKA, cost,
held-out retention, probes, significance, ablations, paper vs reproduced).

Each module computes one analysis from stored files (updates, summaries, cells, held-out
files) and writes its tables under ``results/tables/<benchmark>/`` and its figures under
``results/figures/<benchmark>/`` (PNG + PDF). The few that need a forward pass
(:mod:`codyra.analysis.probes`, :mod:`codyra.analysis.conflict`) are their own jobs.
"""
