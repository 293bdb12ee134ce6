"""codyra: continual-learning experiments with rank-selective LoRA (CoDyRA).

Kept import-light on purpose: every Snakemake job process pays for what this imports.
"""

__version__ = "0.1.0"
