"""The `mini` benchmark: a tiny CLIP pretrained on synthetic scenes, then a stream of small tasks."""

TASK_NAMES = ("shape", "colour", "texture", "count", "position", "digits")
