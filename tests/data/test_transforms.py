"""Transforms: eval equals open_clip's; training augmentation is a function of the generator."""

import numpy as np
import pytest
import torch
from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD
from open_clip.transform import image_transform
from PIL import Image
from torchvision.transforms import (
    Compose,
    InterpolationMode,
    Normalize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    ToTensor,
)

from codyra.data.tasks import ImageConfig
from codyra.data.transforms import (
    CROP_RATIO,
    CROP_SCALE,
    EvalTransform,
    TrainTransform,
    random_resized_crop_box,
)

OPENAI = ImageConfig(size=224, mean=OPENAI_DATASET_MEAN, std=OPENAI_DATASET_STD)


def noise_image(width, height, seed=0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


@pytest.mark.parametrize(("width", "height"), [(300, 200), (180, 260), (224, 224), (50, 40)])
def test_eval_transform_matches_open_clip(width, height):
    image = noise_image(width, height)
    reference = image_transform(OPENAI.size, is_train=False, mean=OPENAI.mean, std=OPENAI.std)(image)
    ours = EvalTransform(OPENAI)(image)
    assert ours.shape == (3, 224, 224) and ours.dtype == torch.float32
    assert torch.equal(ours, reference)


@pytest.mark.parametrize(("height", "width"), [(200, 300), (500, 10), (10, 500), (64, 64)])
def test_crop_box_draws_like_torchvision(height, width):
    # (500, 10) and (10, 500) cannot fit the ratio range and exercise the centred fallback.
    probe = torch.zeros(3, height, width)
    for seed in range(20):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            expected = RandomResizedCrop.get_params(probe, list(CROP_SCALE), list(CROP_RATIO))
        generator = torch.Generator().manual_seed(seed)
        assert random_resized_crop_box(height, width, CROP_SCALE, CROP_RATIO, generator) == expected


def test_train_transform_depends_only_on_the_generator():
    image = noise_image(90, 70)
    transform = TrainTransform(ImageConfig(size=32, mean=OPENAI.mean, std=OPENAI.std))
    global_state = torch.random.get_rng_state()
    first = transform(image, torch.Generator().manual_seed(5))
    torch.manual_seed(123)  # the global RNG must not matter
    again = transform(image, torch.Generator().manual_seed(5))
    assert torch.equal(first, again)
    outputs = [transform(image, torch.Generator().manual_seed(seed)) for seed in range(8)]
    assert len({output.sum().item() for output in outputs}) > 1
    assert first.shape == (3, 32, 32) and first.dtype == torch.float32
    torch.random.set_rng_state(global_state)


def torchvision_pipeline(config: ImageConfig, flips: bool) -> Compose:
    """A training transform written with torchvision's stateful transforms (the global RNG): the crop of
    scale 0.9-1, bicubic, then a horizontal flip where ``flips``."""
    crop = RandomResizedCrop(config.size, scale=(0.9, 1.0), interpolation=InterpolationMode.BICUBIC)
    return Compose([crop, *([RandomHorizontalFlip()] if flips else []), ToTensor(), Normalize(config.mean, config.std)])


@pytest.mark.parametrize(
    ("augmentation", "flips"),
    [("paper", True), ("zscl", False)],  # zscl: ZSCL's and MoE-Adapters' clip.py _transform(is_train=True)
)
def test_train_transform_equals_torchvision_pipeline_seeded_the_same(augmentation, flips):
    # With the global RNG seeded like our generator, both must produce the same tensor.
    config = ImageConfig(size=48, mean=OPENAI.mean, std=OPENAI.std)
    assert CROP_SCALE == (0.9, 1.0)
    reference = torchvision_pipeline(config, flips)
    image = noise_image(120, 80)
    flipped = 0
    for seed in range(40):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            expected = reference(image)
        ours = TrainTransform(config, augmentation)(image, torch.Generator().manual_seed(seed))
        assert torch.equal(ours, expected)
        crop_only = TrainTransform(config, "zscl")(image, torch.Generator().manual_seed(seed))
        flipped += not torch.equal(ours, crop_only)  # the same draws for the crop, then a flip or not
    assert (0 < flipped < 40) if flips else flipped == 0  # the paper's flips some crops: both branches exercised


def test_an_unknown_augmentation_is_refused():
    config = ImageConfig(size=48, mean=OPENAI.mean, std=OPENAI.std)
    with pytest.raises(ValueError, match="unknown augmentation 'flip'; known: paper, zscl"):
        TrainTransform(config, "flip")
