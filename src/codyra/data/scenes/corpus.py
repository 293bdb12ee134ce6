"""The pretraining corpus: random scenes and handwritten digits with captions that mention
random attribute subsets, some attributes only rarely.

Captions use the same phrasing as the task templates ("a photo of ...", "on a striped
background", "in the top left"). What the corpus says decides what the pretrained model
knows before any task, so every mini task starts from partial knowledge:

- shape, colour, count and the coarse positions (corners, centre) are mentioned often;
- hues ("pink"), tones ("dark red"), textures, the in-between sizes (tiny, medium) and the edge positions
  ("top center") only rarely;
- digits are shown, but only some are named ("a handwritten three"); the rest are just
  "a handwritten digit".
"""

from __future__ import annotations

import numpy as np

from codyra.data.scenes.render import (
    COUNTS,
    DIGITS,
    HUES,
    Scene,
    digit_pools,
    random_scene,
    render,
    render_digit,
    sklearn_digits,
)

PREFIXES = ("a photo of", "a picture of", "an image of", "")
PLURALS = {"cross": "crosses"}
COARSE_POSITIONS = ("top left", "top right", "center", "bottom left", "bottom right")
COMMON_SIZES = ("small", "large")
# How often a caption mentions an attribute (given the scene has it)
MENTION = {
    "shape": 0.6,
    "colour": 0.6,
    "hue": 0.1,  # of a hue ("pink"): otherwise its caption names no colour
    "tone": 0.08,  # of a dark or light colour, when the colour is mentioned
    "size": 0.6,
    "rare_size": 0.05,
    "texture": 0.06,
    "count": 0.5,
    "position": 0.5,
    "rare_position": 0.05,
}
DIGIT_FRACTION = 0.1  # share of the corpus that shows a handwritten digit
NAMED_DIGITS = DIGITS[:5]  # "zero".."four" are named (half the time); "five".."nine" never


def _said(rng: np.random.Generator, attribute: str) -> bool:
    return bool(rng.random() < MENTION[attribute])


def caption(scene: Scene, rng: np.random.Generator) -> str:
    noun = scene.shape if _said(rng, "shape") else ("shape" if rng.random() < 0.5 else "object")
    counted = _said(rng, "count")
    if scene.count > 1:
        noun = PLURALS.get(noun, noun + "s")
        lead = COUNTS[scene.count - 1] if counted else "some"
    else:
        lead = "one" if counted and rng.random() < 0.3 else "a"
    words = [lead]
    if scene.count == 1 and _said(rng, "size" if scene.size in COMMON_SIZES else "rare_size"):
        words.append(scene.size)
    if _said(rng, "colour") and (scene.colour not in HUES or _said(rng, "hue")):
        if scene.tone != "normal" and _said(rng, "tone"):
            words.append(scene.tone)
        words.append(scene.colour)
    words.append(noun)
    if _said(rng, "texture"):
        words.append(f"on a {scene.texture} background")
    if scene.count == 1 and _said(rng, "position" if scene.position in COARSE_POSITIONS else "rare_position"):
        words.append(f"in the {scene.position}")
    prefix = PREFIXES[rng.integers(len(PREFIXES))]
    text = " ".join(words)
    if lead == "a" and text[2] in "aeiou":
        text = "an" + text[1:]
    return f"{prefix} {text}".strip() + "."


def digit_caption(label: int, rng: np.random.Generator) -> str:
    name = DIGITS[label]
    what = f"handwritten {name}" if name in NAMED_DIGITS and rng.random() < 0.5 else "handwritten digit"
    prefix = PREFIXES[rng.integers(len(PREFIXES))]
    return f"{prefix} a {what}.".strip()


def make_corpus(size: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """``size`` uint8 NHWC images and their captions, deterministic in ``seed``.

    Digits come from the train pool of the digits task (``seed`` is also the data seed that
    splits it), never from its test pool.
    """
    rng = np.random.default_rng([seed, 0xC0])
    _, train_pool = digit_pools(seed)
    labels = sklearn_digits()[1]
    images, captions = [], []
    for _ in range(size):
        if rng.random() < DIGIT_FRACTION:
            index = int(train_pool[rng.integers(len(train_pool))])
            images.append(render_digit(index, rng))
            captions.append(digit_caption(int(labels[index]), rng))
        else:
            scene = random_scene(rng)
            images.append(render(scene, rng))
            captions.append(caption(scene, rng))
    return np.stack(images), captions
