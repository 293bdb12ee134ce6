import pytest
from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

from codyra.data.tasks import ImageConfig

from .fixtures import write_all

# CLIP's normalisation at a small size keeps the image tests fast.
CLIP_IMAGE = ImageConfig(size=32, mean=OPENAI_DATASET_MEAN, std=OPENAI_DATASET_STD)


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    """All 11 datasets, written once; tests that damage a dataset write their own copy."""
    return write_all(tmp_path_factory.mktemp("clip-data"))


@pytest.fixture
def image_config():
    return CLIP_IMAGE
