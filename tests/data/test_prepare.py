"""`codyra data prepare --from coop`: data.root's layout linked from a folder laid out as CoOp's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from codyra.cli import main
from codyra.rehearsal.datasets import write_cifar100, write_datasets, write_mnist, write_places365

from .test_rehearsal_datasets import CONFIG_DIR, paper_config

# CoOp's DATASETS.md (KaiyangZhou/CoOp): each of its folders, and where the torchvision layout keeps
# the same files (codyra.data.catalog)
COOP_FOLDERS = {
    "fgvc_aircraft": "fgvc-aircraft-2013b/data",
    "caltech-101": "caltech101",
    "dtd": "dtd/dtd",
    "eurosat": "eurosat",
    "oxford_flowers": "flowers-102",
    "food-101": "food-101",
    "oxford_pets": "oxford-iiit-pet",
    "stanford_cars": "stanford_cars",
    "sun397/SUN397": "SUN397",
    "imagenet/images/val": "imagenet/val",
    "imagenet/images/train": "imagenet/train",
}


@pytest.fixture(scope="module")
def coop(tmp_path_factory) -> Path:
    """X-TAIL's datasets and ZSCL's ImageNet training images as CoOp lays them out: no MNIST, CIFAR100,
    Places365 or captions; Flowers without setid.mat; SUN397's split file beside SUN397/."""
    base = tmp_path_factory.mktemp("coop-source")
    written = base / "torchvision"
    write_datasets(paper_config("xtail_16shot.yaml", written, base / "results"), written, train_per_class=16)
    coop = base / "coop"
    for folder, source in COOP_FOLDERS.items():
        (coop / folder).parent.mkdir(parents=True, exist_ok=True)
        os.rename(written / source, coop / folder)
    os.rename(coop / "sun397/SUN397/split_zhou_SUN397.json", coop / "sun397/split_zhou_SUN397.json")
    (coop / "oxford_flowers" / "setid.mat").unlink()
    (coop / "food-101" / "README.txt").write_text("Food-101\n")
    return coop


def config_file(tmp_path: Path, name: str, root: Path) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"extends": str(CONFIG_DIR / name), "data": {"root": str(root)}}))
    return path


def prepare(coop: Path, config: Path) -> int:
    return main(["data", "prepare", "--from", "coop", str(coop), "--config", str(config)])


def files_under(folder: Path) -> list[str]:
    return sorted(str(Path(d) / f) for d, _, names in os.walk(folder) for f in names)


def section(out: str, title: str) -> str:
    """The lines prepare prints under one dataset."""
    lines = out.splitlines()
    start = lines.index(f"{title}:") + 1
    end = next((k for k in range(start, len(lines)) if not lines[k].startswith("  ")), len(lines))
    return "\n".join(lines[start:end])


def test_prepare_links_coop_s_datasets_and_names_what_is_missing(coop, tmp_path, capsys):
    before = files_under(coop)
    root = tmp_path / "data"
    (root / "food-101").mkdir(parents=True)
    (root / "food-101" / "README.txt").write_text("mine\n")
    config = config_file(tmp_path, "xtail_16shot.yaml", root)

    assert prepare(coop, config) == 1
    out = capsys.readouterr().out
    assert files_under(coop) == before  # nothing written into CoOp's folder
    assert (root / "eurosat" / "2750").is_symlink() and (
        root / "eurosat" / "2750"
    ).resolve() == coop / "eurosat" / "2750"
    assert (root / "dtd" / "dtd" / "split_zhou_DescribableTextures.json").is_symlink()
    assert (root / "SUN397" / "split_zhou_SUN397.json").resolve() == coop / "sun397" / "split_zhou_SUN397.json"
    assert (root / "imagenet" / "val").resolve() == coop / "imagenet" / "images" / "val"
    assert not [p for p in files_under(root) if not Path(p).is_symlink() and "README" not in p]  # no copies
    assert (root / "food-101" / "README.txt").read_text() == "mine\n"  # never replaced
    assert "kept as they are (never replaced): food-101/README.txt" in section(out, "Food")
    assert "linked 2: eurosat/2750, eurosat/split_zhou_EuroSAT.json" in section(out, "EuroSAT")
    for name in ("MNIST", "CIFAR100", "Places365"):
        assert "not in CoOp's layout; missing:" in section(out, name)
    assert "torchvision.datasets.MNIST(root=" in section(out, "MNIST")
    assert "linked 1: imagenet/train" in section(out, "reference data (data.reference, kind zscl)")
    assert "Validation_GCC-1.1.0-Validation" in section(out, "reference data (data.reference, kind zscl)")
    assert "10 of 14 complete" in out  # 13 datasets and the reference data; the captions are still missing

    # what CoOp's layout lacks, obtained as the messages say; a second run links nothing twice
    write_mnist(root, 16)
    write_cifar100(root, 16)
    write_places365(root)
    (root / "conceptual_captions").mkdir()
    (root / "conceptual_captions" / "Validation_GCC-1.1.0-Validation_output.csv").write_text("title\ta caption\n")
    assert prepare(coop, config) == 0
    out = capsys.readouterr().out
    assert "\n  linked " not in out and "14 of 14 complete" in out
    assert main(["data", "check", "--config", str(config)]) == 0
    assert "13 of 13 datasets usable" in capsys.readouterr().out


def test_mtil_needs_flowers_setid_which_coop_lacks(coop, tmp_path, capsys):
    root = tmp_path / "data"
    assert prepare(coop, config_file(tmp_path, "mtil_5shot.yaml", root)) == 1
    flowers = section(capsys.readouterr().out, "Flowers")
    assert f"still missing: {root}/flowers-102/setid.mat" in flowers


def test_a_folder_that_is_a_link_is_not_written_into(coop, tmp_path, capsys):
    root, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    (elsewhere / "2750").mkdir(parents=True)
    root.mkdir()
    (root / "eurosat").symlink_to(elsewhere)
    assert prepare(coop, config_file(tmp_path, "xtail_16shot.yaml", root)) == 1
    assert os.listdir(elsewhere) == ["2750"]
    assert "kept as they are (never replaced): eurosat\n" in section(capsys.readouterr().out, "EuroSAT") + "\n"


def test_a_missing_source_folder_is_refused(tmp_path):
    config = config_file(tmp_path, "xtail_16shot.yaml", tmp_path / "data")
    assert prepare(tmp_path / "nowhere", config) == 2
