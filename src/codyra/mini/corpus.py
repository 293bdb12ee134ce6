"""The pretraining corpus: random scenes with captions that mention random attribute subsets.

Captions use the same phrasing as the task templates ("a photo of ...", "on a striped
background", "in the top left"), so the pretrained model can classify shape, colour,
count, position and (weakly) texture zero-shot. Digits never appear: that task starts at
chance.
"""

from __future__ import annotations

import numpy as np

from codyra.mini.render import COUNTS, Scene, random_scene, render

PREFIXES = ("a photo of", "a picture of", "an image of", "")
PLURALS = {"cross": "crosses"}


def caption(scene: Scene, rng: np.random.Generator) -> str:
    keep = rng.random(5) < (0.6, 0.6, 0.6, 0.45, 0.5)  # shape, colour, size, texture, count/position
    noun = scene.shape if keep[0] else ("shape" if rng.random() < 0.5 else "object")
    if scene.count > 1:
        noun = PLURALS.get(noun, noun + "s")
        lead = COUNTS[scene.count - 1] if keep[4] else "some"
    else:
        lead = "one" if keep[4] and rng.random() < 0.3 else "a"
    words = [lead]
    if keep[2] and scene.count == 1:
        words.append(scene.size)
    if keep[1]:
        words.append(scene.colour)
    words.append(noun)
    if keep[3]:
        words.append(f"on a {scene.texture} background")
    if scene.count == 1 and keep[4]:
        words.append(f"in the {scene.position}")
    prefix = PREFIXES[rng.integers(len(PREFIXES))]
    text = " ".join(words)
    if lead == "a" and text[2] in "aeiou":
        text = "an" + text[1:]
    return f"{prefix} {text}".strip() + "."


def make_corpus(size: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """``size`` uint8 NHWC images and their captions, deterministic in ``seed``."""
    rng = np.random.default_rng([seed, 0xC0])
    images, captions = [], []
    for _ in range(size):
        scene = random_scene(rng)
        images.append(render(scene, rng))
        captions.append(caption(scene, rng))
    return np.stack(images), captions
