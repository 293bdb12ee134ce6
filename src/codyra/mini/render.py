"""Synthetic 32x32 scenes: coloured shapes on low-contrast grey textures.

Every scene is a pure function of its attributes and a numpy Generator, so datasets are
reproducible from a seed without storing any image.
"""

from __future__ import annotations

from dataclasses import dataclass

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
TEXTURES = ("plain", "striped", "checkered", "dotted", "noisy")
POSITIONS = {
    "center": (16, 16),
    "top left": (9, 9),
    "top right": (23, 9),
    "bottom left": (9, 23),
    "bottom right": (23, 23),
}
SIZES = {"small": 4.0, "large": 7.5}
COUNTS = ("one", "two", "three", "four")
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


def render(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """uint8 HWC image of a scene."""
    canvas = np.repeat(texture(scene.texture, rng)[..., None], 3, axis=2)
    colour = np.clip(np.array(COLOURS[scene.colour]) + rng.uniform(-0.05, 0.05, 3), 0, 1)
    if scene.count == 1:
        cx, cy = POSITIONS[scene.position]
        centres, radius = [(cx + rng.uniform(-1.5, 1.5), cy + rng.uniform(-1.5, 1.5))], SIZES[scene.size]
    else:
        cells = rng.choice(9, size=scene.count, replace=False)
        centres = [(_GRID[c % 3] + rng.uniform(-1, 1), _GRID[c // 3] + rng.uniform(-1, 1)) for c in cells]
        radius = 3.5
    for cx, cy in centres:
        canvas[shape_mask(scene.shape, cx, cy, radius)] = colour
    canvas += rng.normal(0, 0.02, canvas.shape)
    return (np.clip(canvas, 0, 1) * 255).round().astype(np.uint8)


def random_scene(rng: np.random.Generator, **fixed) -> Scene:
    count = fixed.get("count") or (1 if rng.random() < 0.6 else int(rng.integers(2, 5)))
    return Scene(
        shape=fixed.get("shape") or SHAPES[rng.integers(len(SHAPES))],
        colour=fixed.get("colour") or list(COLOURS)[rng.integers(len(COLOURS))],
        size=fixed.get("size") or list(SIZES)[rng.integers(len(SIZES))],
        texture=fixed.get("texture") or TEXTURES[rng.integers(len(TEXTURES))],
        position=fixed.get("position") or list(POSITIONS)[rng.integers(len(POSITIONS))],
        count=count,
    )
