"""Reference data (config key data.reference, ZSCL): presence checks, `codyra data check`, loading."""

import os
import time

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from codyra.cli import main
from codyra.data import reference
from codyra.data.check import check_config
from codyra.data.presence import require_benchmark_data
from codyra.data.reference import CC_CAPTIONS, IMAGENET_TRAIN, load_reference, missing_reference, require_reference
from codyra.data.scenes.corpus import make_corpus
from codyra.experiment.config import load_config, read_config_file
from codyra.methods import method_of
from codyra.rehearsal.datasets import write_aircraft

from .test_cli import config_dict
from .test_rehearsal_datasets import CONFIG_DIR


def zscl_config(root, reference={"kind": "zscl"}):  # noqa: B006 - never mutated
    raw = config_dict(root, "mtil", ["Aircraft"])
    raw["data"]["reference"] = reference
    raw["results"] = str(root / "results")
    return raw


def reference_readers(cfg):
    """The grid's methods whose class declares that it distils on data.reference."""
    return [m for m in cfg["methods"] if method_of(cfg, m).reads_reference_data]


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


@pytest.mark.parametrize(
    ("name", "readers"),
    [("mtil_5shot.yaml", ["zscl"]), ("xtail_16shot.yaml", ["zscl"]), ("blip_xtail_16shot.yaml", [])],
)
def test_the_paper_grids_read_the_reference_only_through_zscl(name, readers):
    raw = read_config_file(CONFIG_DIR / name)
    cfg = load_config(raw)
    assert cfg["data"]["reference"]["kind"] == "zscl"  # set for every CLIP paper grid (config/base/clip_paper.yaml)
    assert reference_readers(cfg) == readers


def test_a_grid_without_a_reference_reader_needs_no_reference_data(tmp_path):
    write_aircraft(tmp_path)
    cfg = load_config(zscl_config(tmp_path))  # data.reference set; its one method, zeroshot, reads none
    assert reference_readers(cfg) == [] and missing_reference(cfg)
    require_benchmark_data(cfg, reference_readers(cfg))  # no ImageNet train images, no captions: passes
    assert check_config(cfg, reference_readers=[]) == []
    with pytest.raises(FileNotFoundError, match="data.reference"):
        require_benchmark_data(cfg, ["zscl"])
    assert check_config(cfg, reference_readers=["zscl"]) == missing_reference(cfg)
    cfg["data"]["reference"] = None
    with pytest.raises(ValueError, match="method 'zscl' distils on reference data but config key data.reference"):
        require_benchmark_data(cfg, ["zscl"])


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


def test_data_check_reports_the_reference_where_a_method_reads_it(tmp_path, capsys):
    write_aircraft(tmp_path)
    raw, path = zscl_config(tmp_path), tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["data", "check", "--config", str(path)]) == 0  # zero-shot only: no reference data read
    capsys.readouterr()
    raw["methods"].append("zscl")
    raw["method_configs"]["zscl"] = {"kind": "zscl"}
    path.write_text(yaml.safe_dump(raw))
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


def test_the_reference_images_are_listed_once_per_results_folder(tmp_path, image_config, monkeypatch):
    write_reference(tmp_path)
    cfg = load_config(zscl_config(tmp_path))
    train = tmp_path / IMAGENET_TRAIN
    listed, scandir = [], os.scandir

    def counted(path):
        if str(path).startswith(str(train)):
            listed.append(os.path.relpath(path, train))
        return scandir(path)

    monkeypatch.setattr(reference.os, "scandir", counted)
    first = load_reference(cfg, image_config).images
    assert sorted(listed) == [".", ".", "n01", "n02"]  # the stamp, then the walk: the folder and each class folder
    assert [p.relative_to(train).as_posix() for p in first.paths] == ["n01/a.JPEG", "n02/a.JPEG"]
    assert list((tmp_path / "results" / "reference").glob("images-*.json.gz"))

    listed.clear()
    assert load_reference(cfg, image_config).images.paths == first.paths
    assert listed == ["."]  # the stamp alone: one read of the top folder, no class folder walked

    time.sleep(0.05)  # past the file system's timestamp granularity
    Image.new("RGB", (40, 30), (0, 255, 0)).save(train / "n01" / "b.JPEG")
    listed.clear()
    changed = load_reference(cfg, image_config).images.paths
    assert [p.relative_to(train).as_posix() for p in changed] == ["n01/a.JPEG", "n01/b.JPEG", "n02/a.JPEG"]
    assert "n01" in listed  # the changed folder was listed again

    (train / "n03").mkdir()
    Image.new("RGB", (40, 30), (0, 0, 0)).save(train / "n03" / "c.JPEG")
    assert len(load_reference(cfg, image_config).images) == 4  # a new class folder is noticed too
