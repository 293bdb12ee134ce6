"""The 11 CLIP datasets of the MTIL and X-TAIL benchmarks.

Entry points live in `codyra.data.registry` (build_task, label_space, check_datasets);
this package imports nothing itself, so `codyra.data.check` can register its command
without pulling in torch.
"""
