"""The mini CLIP benchmark's data: synthetic scenes rendered from a seed (``render``), the
captioned corpus its tiny CLIP is pretrained on (``corpus``, :mod:`codyra.mini.clip.pretrain`)
and the stream of small classification tasks (``tasks``)."""

# Order fixes each task's data-generation seed: append new tasks, never reorder.
TASK_NAMES = ("shape", "colour", "texture", "count", "position", "digits", "shade", "size", "hue")
