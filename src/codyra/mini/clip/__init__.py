"""The mini CLIP benchmark: a tiny CLIP (``model_configs``) pretrained on synthetic scenes, then a stream of small tasks."""

# Order fixes each task's data-generation seed: append new tasks, never reorder.
TASK_NAMES = ("shape", "colour", "texture", "count", "position", "digits", "shade", "size", "hue")
