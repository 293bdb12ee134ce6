"""Evaluation caches: the same model input as decoding the JPEGs, bit for bit; stale or corrupt
caches refused with their fix named; a killed build leaves nothing a reader would use. Few-shot
training sets decoded once into memory: the same augmented images as reading the files."""

import os
from dataclasses import replace

import numpy as np
import pytest
import torch

from codyra.data.eval_cache import (
    CachedEvalSet,
    EvalCacheError,
    build_eval_cache,
    eval_batches,
    has_eval_cache,
    open_eval_cache,
)
from codyra.data.registry import build_task
from codyra.data.samples import DecodedImages, ImageFiles
from codyra.data.tasks import ImageConfig
from codyra.data.views import EvalView, TrainView
from codyra.rehearsal.datasets import write_dtd, write_image, write_mnist
from codyra.store.paths import EVAL_CACHE_IMAGES, EVAL_CACHE_MANIFEST

CPU = torch.device("cpu")


@pytest.fixture
def dtd(tmp_path, image_config):
    """A DTD copy of this test's own (tests here edit its images), its test view and a built cache."""
    write_dtd(tmp_path / "data")
    view = build_task("DTD", "mtil", tmp_path / "data", image_config).test_set()
    cache = tmp_path / "cache"
    build_eval_cache(view.samples, view.transform, cache, workers=0)
    return view, cache


def batches(dataset, batch_size=3, workers=0):
    return list(eval_batches(dataset, batch_size=batch_size, num_workers=workers, device=CPU))


@pytest.mark.parametrize("workers", [0, 2])
def test_cached_batches_are_bitwise_the_decoded_ones(dtd, workers):
    view, cache = dtd
    cached = open_eval_cache(cache, view.samples, view.transform)
    assert isinstance(cached, CachedEvalSet) and len(cached) == len(view) and cached.labels == view.labels
    image, label = cached[1]
    assert image.dtype == torch.uint8 and image.shape == (3, 32, 32) and label == view[1][1]
    for (x, y), (x_ref, y_ref) in zip(batches(cached, workers=workers), batches(view), strict=True):
        assert x.dtype == torch.float32 and torch.equal(x, x_ref) and torch.equal(y, y_ref)
    # a Subset of a cache (routed rows score chosen images), in another order
    indices = [4, 0, 2]
    subset = torch.utils.data.Subset(cached, indices)
    [(x, y)] = batches(subset)
    assert torch.equal(x, torch.stack([view[i][0] for i in indices])) and y.tolist() == [view[i][1] for i in indices]


def test_an_in_memory_dataset_is_cached_and_its_arrays_are_its_state(tmp_path, image_config):
    write_mnist(tmp_path / "data")
    view = build_task("MNIST", "mtil", tmp_path / "data", image_config).test_set()
    build_eval_cache(view.samples, view.transform, tmp_path / "cache", workers=0)
    cached = open_eval_cache(tmp_path / "cache", view.samples, view.transform)
    assert torch.equal(batches(cached)[0][0], batches(view)[0][0])
    view.samples.images.dataset.data[0, 0, 0] += 1  # an edited in-memory image
    with pytest.raises(EvalCacheError, match="an image changed since it was built"):
        open_eval_cache(tmp_path / "cache", view.samples, view.transform)


def test_the_task_reads_its_cache_once_built(tmp_path, image_config):
    write_dtd(tmp_path / "data")
    cache = tmp_path / "cache"
    task = build_task("DTD", "mtil", tmp_path / "data", image_config, eval_cache=cache)
    decoded = task.test_set()
    assert isinstance(decoded, EvalView) and not has_eval_cache(cache)  # not built: the images decoded as read
    build_eval_cache(decoded.samples, decoded.transform, cache, workers=0)
    assert isinstance(task.test_set(), CachedEvalSet)


def test_a_flipped_byte_fails_the_read_naming_the_image(dtd):
    view, cache = dtd
    path = cache / EVAL_CACHE_IMAGES
    data = bytearray(path.read_bytes())
    image_bytes = 3 * 32 * 32
    data[len(data) - 3 * image_bytes + 17] ^= 0x01  # a bit of the third image from the end
    path.write_bytes(bytes(data))
    cached = open_eval_cache(cache, view.samples, view.transform)  # the header still fits
    broken = len(view) - 3
    with pytest.raises(EvalCacheError, match=f"image {broken} does not match its checksum"):
        batches(cached, batch_size=4)
    with pytest.raises(EvalCacheError, match="corrupt"):
        cached[broken]
    assert torch.equal(cached[0][0], view.transform.crop(view.samples.images.load(view.samples.keys[0])))


def test_a_truncated_file_is_refused_on_opening(dtd):
    view, cache = dtd
    path = cache / EVAL_CACHE_IMAGES
    os.truncate(path, path.stat().st_size - 100)
    with pytest.raises(EvalCacheError, match=f"{EVAL_CACHE_IMAGES} cannot be read.*delete .*cache.* rerun"):
        open_eval_cache(cache, view.samples, view.transform)


def test_a_file_cut_short_after_opening_fails_the_read_naming_the_image(dtd):
    view, cache = dtd
    cached = open_eval_cache(cache, view.samples, view.transform)
    cached.read([0])  # the map is open: the shape checks passed
    path = cache / EVAL_CACHE_IMAGES
    with open(path, "r+b") as file:
        file.truncate(path.stat().st_size - 3 * 32 * 32)  # the last image gone
    last = len(view) - 1
    with pytest.raises(EvalCacheError, match=f"ends before image {last} .*truncated"):
        cached.read(list(range(last - 1, last + 1)))


def test_an_image_edited_since_the_build_is_refused(dtd):
    view, cache = dtd
    edited = view.samples.images.root / view.samples.keys[2]
    write_image(edited, size=(24, 18))  # another image under the same name
    with pytest.raises(EvalCacheError, match="an image changed since it was built.*eval-cache"):
        open_eval_cache(cache, view.samples, view.transform)


def test_another_transform_or_split_is_refused(dtd, image_config):
    view, cache = dtd
    larger = type(view.transform)(ImageConfig(48, image_config.mean, image_config.std))
    with pytest.raises(EvalCacheError, match="built with the transform .*'size': 32.*'size': 48"):
        open_eval_cache(cache, view.samples, larger)
    fewer = view.samples.subset(range(len(view) - 1))
    with pytest.raises(EvalCacheError, match="another split listing"):
        open_eval_cache(cache, fewer, view.transform)
    with pytest.raises(EvalCacheError, match="no evaluation cache"):
        open_eval_cache(cache.parent / "absent", view.samples, view.transform)


def test_a_failed_build_leaves_no_manifest_and_no_partial_file(dtd):
    view, cache = dtd
    assert has_eval_cache(cache)
    os.remove(view.samples.images.root / view.samples.keys[-1])  # the build dies on the last image
    with pytest.raises(FileNotFoundError):
        build_eval_cache(view.samples, view.transform, cache, workers=0)
    assert not has_eval_cache(cache)  # the old manifest went first: nothing points at a half-written file
    assert sorted(p.name for p in cache.iterdir()) == [EVAL_CACHE_IMAGES]  # the old images; no temporary left


def test_the_manifest_records_a_checksum_per_image(dtd):
    view, cache = dtd
    import json
    import zlib

    manifest = json.loads((cache / EVAL_CACHE_MANIFEST).read_text())
    images = np.load(cache / EVAL_CACHE_IMAGES, allow_pickle=False)
    assert manifest["count"] == len(images) == len(view) and manifest["transform"]["size"] == 32
    assert manifest["crc32"] == [zlib.crc32(np.ascontiguousarray(image)) for image in images]


def test_a_fewshot_training_set_is_decoded_once_and_augments_as_the_files_do(tmp_path, image_config):
    root = tmp_path / "data"
    write_dtd(root)
    task = build_task("DTD", "mtil", root, image_config, fewshot_k=2)
    fewshot, under_eval = task.train_set(), task.train_eval_set()  # augmented; under the evaluation transform
    decoded = fewshot.samples.images
    assert isinstance(decoded, DecodedImages) and set(decoded.arrays) == set(fewshot.samples.keys)
    assert isinstance(under_eval.samples.images, DecodedImages)
    from_files = TrainView(replace(fewshot.samples, images=decoded.source), fewshot.transform)
    eval_from_files = EvalView(replace(under_eval.samples, images=decoded.source), under_eval.transform)
    keys = [(0, 3), (1, 7), (len(fewshot) - 1, 11)]
    expected = [from_files[key] for key in keys]
    expected_eval = [eval_from_files[i] for i in range(len(under_eval))]
    for key in fewshot.samples.keys:
        os.remove(root / key)  # decoded once: the files are not read again
    for key, (image, label) in zip(keys, expected, strict=True):
        assert torch.equal(fewshot[key][0], image) and fewshot[key][1] == label
    for i, (image, label) in enumerate(expected_eval):
        assert torch.equal(under_eval[i][0], image) and under_eval[i][1] == label
    write_dtd(root)
    full = build_task("DTD", "mtil", root, image_config).train_set()  # the full split streams from the files
    assert isinstance(full.samples.images, ImageFiles)
