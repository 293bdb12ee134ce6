"""Synthetic 32x32 scenes (coloured shapes on low-contrast grey textures) and handwritten digits.

Every image is a pure function of its attributes and a numpy Generator, so datasets are
reproducible from a seed without storing any image.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SIZE = 32
SHAPES = ("circle", "square", "triangle", "diamond", "ring", "cross")
COLOURS = {
    "red": (0.90, 0.10, 0.10),
    "orange": (1.00, 0.55, 0.00),
    "yellow": (0.95, 0.90, 0.10),
    "green": (0.10, 0.75, 0.20),
    "cyan": (0.10, 0.85, 0.90),
    "blue": (0.15, 0.25, 0.95),
    "purple": (0.60, 0.15, 0.85),
    "white": (0.97, 0.97, 0.97),
}
# Hues between the eight base colours, at full saturation (so no tone of a base colour
# resembles them): named only rarely by the pretraining captions.
HUES = {
    "lime": (0.60, 0.95, 0.10),
    "turquoise": (0.10, 0.90, 0.60),
    "azure": (0.10, 0.55, 0.95),
    "violet": (0.40, 0.10, 0.95),
    "magenta": (0.90, 0.10, 0.90),
    "pink": (0.95, 0.15, 0.55),
}
HUE_FRACTION = 0.25  # share of random scenes drawn in a hue instead of a base colour
# Tones of a colour: "dark red" is red at half intensity, "light red" half-way to white.
TONES = ("normal", "dark", "light")
TEXTURES = ("plain", "striped", "checkered", "dotted", "noisy")
# A 3x3 grid of places for a single object; the corners and the centre are the "coarse" five.
POSITIONS = {
    "top left": (9, 9),
    "top center": (16, 9),
    "top right": (23, 9),
    "center left": (9, 16),
    "center": (16, 16),
    "center right": (23, 16),
    "bottom left": (9, 23),
    "bottom center": (16, 23),
    "bottom right": (23, 23),
}
SIZES = {"tiny": 2.5, "small": 4.0, "medium": 5.5, "large": 7.5}
COUNTS = ("one", "two", "three", "four")
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
DIGITS_TEST_POOL = 500  # scikit-learn's first 500 digits (after a fixed permutation) are test-only
_GRID = (6, 16, 26)  # cell centres for scenes with several copies
_YY, _XX = np.mgrid[0:SIZE, 0:SIZE] + 0.5


@dataclass(frozen=True)
class Scene:
    shape: str
    colour: str
    size: str
    texture: str
    position: str  # meaningful when count == 1
    count: int
    tone: str = "normal"


def shape_mask(shape: str, cx: float, cy: float, r: float) -> np.ndarray:
    dx, dy = _XX - cx, _YY - cy
    if shape == "circle":
        return dx**2 + dy**2 <= r**2
    if shape == "square":
        return np.maximum(abs(dx), abs(dy)) <= 0.8 * r
    if shape == "triangle":  # apex up, base at 0.8 r below the centre
        return (dy <= 0.8 * r) & (abs(dx) <= (dy + r) / 1.8)
    if shape == "diamond":
        return abs(dx) + abs(dy) <= r
    if shape == "ring":
        d2 = dx**2 + dy**2
        return (d2 <= r**2) & (d2 >= (0.5 * r) ** 2)
    if shape == "cross":
        return ((abs(dx) <= 0.35 * r) & (abs(dy) <= r)) | ((abs(dy) <= 0.35 * r) & (abs(dx) <= r))
    raise ValueError(f"unknown shape {shape!r}")


def texture(name: str, rng: np.random.Generator) -> np.ndarray:
    grey, contrast = rng.uniform(0.2, 0.45), 0.12
    if name == "plain":
        pattern = np.zeros((SIZE, SIZE))
    elif name == "striped":
        pattern = ((_YY if rng.random() < 0.5 else _XX) // 4 % 2).astype(float)
    elif name == "checkered":
        pattern = ((_XX // 4 + _YY // 4) % 2).astype(float)
    elif name == "dotted":
        pattern = ((_XX % 6 < 2) & (_YY % 6 < 2)).astype(float)
    elif name == "noisy":
        pattern = rng.random((SIZE, SIZE))
    else:
        raise ValueError(f"unknown texture {name!r}")
    return grey + contrast * pattern


def tone_rgb(colour: str, tone: str) -> np.ndarray:
    rgb = np.array(COLOURS[colour] if colour in COLOURS else HUES[colour])
    if tone == "dark":
        return 0.45 * rgb
    if tone == "light":
        return 0.5 + 0.5 * rgb
    if tone == "normal":
        return rgb
    raise ValueError(f"unknown tone {tone!r}")


def _to_uint8(canvas: np.ndarray) -> np.ndarray:
    return (np.clip(canvas, 0, 1) * 255).round().astype(np.uint8)


def render(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """uint8 HWC image of a scene."""
    canvas = np.repeat(texture(scene.texture, rng)[..., None], 3, axis=2)
    colour = np.clip(tone_rgb(scene.colour, scene.tone) + rng.uniform(-0.05, 0.05, 3), 0, 1)
    if scene.count == 1:
        cx, cy = POSITIONS[scene.position]
        centres, radius = [(cx + rng.uniform(-1.5, 1.5), cy + rng.uniform(-1.5, 1.5))], SIZES[scene.size]
    else:
        cells = rng.choice(9, size=scene.count, replace=False)
        centres = [(_GRID[c % 3] + rng.uniform(-1, 1), _GRID[c // 3] + rng.uniform(-1, 1)) for c in cells]
        radius = 3.5
    for cx, cy in centres:
        canvas[shape_mask(scene.shape, cx, cy, radius)] = colour
    return _to_uint8(canvas + rng.normal(0, 0.02, canvas.shape))


def _random_colour(rng: np.random.Generator) -> str:
    palette = list(HUES) if rng.random() < HUE_FRACTION else list(COLOURS)
    return palette[rng.integers(len(palette))]


def random_scene(rng: np.random.Generator, **fixed) -> Scene:
    count = fixed.get("count") or (1 if rng.random() < 0.6 else int(rng.integers(2, 5)))
    return Scene(
        shape=fixed.get("shape") or SHAPES[rng.integers(len(SHAPES))],
        colour=fixed.get("colour") or _random_colour(rng),
        size=fixed.get("size") or list(SIZES)[rng.integers(len(SIZES))],
        texture=fixed.get("texture") or TEXTURES[rng.integers(len(TEXTURES))],
        position=fixed.get("position") or list(POSITIONS)[rng.integers(len(POSITIONS))],
        count=count,
        tone=fixed.get("tone") or TONES[rng.choice(3, p=(0.5, 0.25, 0.25))],
    )


@lru_cache(maxsize=1)
def sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 1,797 8x8 handwritten digits (values 0-16) and their labels."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target


def digit_pools(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the test pool (first ``DIGITS_TEST_POOL`` of a fixed permutation) and the train pool.

    The pretraining corpus draws its digits from the train pool only, so no test digit is ever seen.
    """
    order = np.random.default_rng([seed, 77]).permutation(len(sklearn_digits()[1]))
    return order[:DIGITS_TEST_POOL], order[DIGITS_TEST_POOL:]


def render_digit(index: int, rng: np.random.Generator, background: str | None = None) -> np.ndarray:
    """scikit-learn digit ``index`` as light strokes on ``background`` (a texture; None: a random
    one), upscaled 8x8 -> 32x32."""
    stroke = np.kron(sklearn_digits()[0][index] / 16.0, np.ones((SIZE // 8, SIZE // 8)))
    grey = texture(background or TEXTURES[rng.integers(len(TEXTURES))], rng)
    canvas = grey * (1 - stroke) + 0.95 * stroke + rng.normal(0, 0.02, stroke.shape)
    return _to_uint8(np.repeat(canvas[..., None], 3, axis=2))
