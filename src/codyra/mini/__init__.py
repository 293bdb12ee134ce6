"""The two mini benchmarks, each with its data generator, tiny model config and own pretraining:
``clip`` (synthetic scenes for a tiny CLIP) and ``trace`` (synthetic TRACE-style tasks for a
tiny LLaMA)."""
