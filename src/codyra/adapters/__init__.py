"""LoRA modules, where they attach (targets and placements), and sparsity operators: model-agnostic."""
