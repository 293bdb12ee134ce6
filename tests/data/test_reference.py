"""Reference data (config key data.reference, ZSCL): presence checks, `codyra data check`, loading."""

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from codyra.cli import main
from codyra.data.presence import require_benchmark_data
from codyra.data.reference import CC_CAPTIONS, IMAGENET_TRAIN, load_reference, missing_reference, require_reference
from codyra.data.scenes.corpus import make_corpus
from codyra.experiment.config import load_config

from .fixtures import write_aircraft
from .test_cli import config_dict


def zscl_config(root, reference={"kind": "zscl"}):  # noqa: B006 - never mutated
    raw = config_dict(root, "mtil", ["Aircraft"])
    raw["data"]["reference"] = reference
    return raw


def write_reference(root):
    for wnid, colour in (("n01", (255, 0, 0)), ("n02", (0, 0, 255))):
        folder = root / IMAGENET_TRAIN / wnid
        folder.mkdir(parents=True)
        Image.new("RGB", (40, 30), colour).save(folder / "a.JPEG")
    (root / "imagenet/train/n02/notes.txt").write_text("not an image")
    captions = root / CC_CAPTIONS
    captions.parent.mkdir(parents=True)
    captions.write_text("title\tfilepath\na dog on a beach\t0.jpg\nsome text\t1.jpg\n")


def test_missing_reference_names_each_file_and_how_to_obtain_it(tmp_path):
    cfg = load_config(zscl_config(tmp_path))
    missing = missing_reference(cfg)
    assert [m.split(" (")[0] for m in missing] == [f"{tmp_path}/imagenet/train/", f"{tmp_path}/{CC_CAPTIONS}"]
    assert "ILSVRC2012_img_train.tar" in missing[0] and "title" in missing[1]
    with pytest.raises(FileNotFoundError, match="data.reference"):
        require_benchmark_data(cfg)  # the DAG build refuses before any job runs


def test_unset_reference_is_an_error_only_for_a_method_that_needs_it(tmp_path):
    cfg = load_config(config_dict(tmp_path, "mtil", ["Aircraft"]))
    assert missing_reference(cfg) == []
    with pytest.raises(ValueError, match="method 'zscl'.*data.reference is not set"):
        require_reference(cfg, "zscl")


def test_zscl_reference_loads_imagenet_train_images_and_cc_captions(tmp_path, image_config):
    write_reference(tmp_path)
    ref = load_reference(load_config(zscl_config(tmp_path)), image_config)
    assert ref.texts == ["a dog on a beach", "some text"]
    assert len(ref.images) == 2  # the .txt file is no image
    red, blue = ref.images[0], ref.images[1]
    assert red.shape == (3, 32, 32) and red[0].mean() > red[2].mean() and blue[2].mean() > blue[0].mean()


def test_data_check_reports_the_reference(tmp_path, capsys):
    write_aircraft(tmp_path)
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(zscl_config(tmp_path)))
    assert main(["data", "check", "--config", str(path)]) == 1
    assert "reference data (data.reference, kind zscl): missing" in capsys.readouterr().out
    write_reference(tmp_path)
    assert main(["data", "check", "--config", str(path)]) == 0
    assert "reference data (data.reference, kind zscl): ok" in capsys.readouterr().out


def test_mini_corpus_reference_is_a_prefix_of_the_pretraining_corpus(image_config):
    cfg = load_config("config/config.yaml")
    cfg["data"]["reference"] = {"kind": "mini-corpus", "size": 6}
    ref = load_reference(cfg, image_config)
    images, captions = make_corpus(9, cfg["mini"]["data_seed"])
    assert ref.texts == captions[:6]
    mean, std = torch.tensor(image_config.mean).view(3, 1, 1), torch.tensor(image_config.std).view(3, 1, 1)
    expected = (torch.from_numpy(np.ascontiguousarray(images[2])).permute(2, 0, 1).float() / 255 - mean) / std
    assert torch.allclose(ref.images[2], expected)
    cfg["data"]["reference"]["size"] = cfg["mini"]["corpus_size"] + 1
    with pytest.raises(ValueError, match="mini.corpus_size"):
        load_reference(cfg, image_config)
