"""`codyra data check --config ...` on fixture datasets."""

import subprocess
import sys

import pytest
import yaml

from codyra.cli import main
from codyra.data.catalog import MTIL_DATASETS, XTAIL_DATASETS
from codyra.rehearsal.datasets import write_aircraft, write_mnist


def check(argv) -> int:
    return main(["data", "check", *argv])


def config_dict(root, protocol, names):
    return {
        "benchmark": "fixture",
        "seeds": [0],
        "methods": ["zeroshot"],
        "model": {"name": "ViT-B-16", "pretrained": "openai"},
        "data": {"kind": protocol, "root": None if root is None else str(root)},
        "tasks": list(names),
        "method_configs": {"zeroshot": {"kind": "zeroshot"}},
    }


def write_config(path, root, protocol, names):
    path.write_text(yaml.safe_dump(config_dict(root, protocol, names)))
    return path


def test_registering_the_command_imports_no_torch():
    code = (
        "import argparse, sys\n"
        "from codyra.data.check import register_cli\n"
        "register_cli(argparse.ArgumentParser().add_subparsers(), print)\n"
        "print(sorted(m for m in ('torch', 'torchvision', 'codyra.data.registry') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("protocol", "names"), [("mtil", MTIL_DATASETS), ("xtail", XTAIL_DATASETS)])
def test_check_passes_on_complete_fixtures(data_root, tmp_path, capsys, protocol, names):
    config = write_config(tmp_path / "b.yaml", data_root, protocol, names)
    assert check(["--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"protocol {protocol}, data root {data_root}" in out
    assert f"{len(names)} of {len(names)} datasets usable" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("dataset"))
    assert header.split()[:5] == ["dataset", "status", "train", "test", "classes"]
    aircraft = next(line for line in lines if line.startswith("Aircraft"))
    assert aircraft.split()[:5] == ["Aircraft", "ok*", "18", "6", "3"]
    assert "ok* = usable, but sizes or classes differ" in out


def test_check_fails_and_explains_missing_datasets(tmp_path, capsys):
    write_aircraft(tmp_path)
    write_mnist(tmp_path)
    (tmp_path / "MNIST/raw/t10k-labels-idx1-ubyte").unlink()
    config = write_config(tmp_path / "b.yaml", tmp_path, "mtil", ["Aircraft", "MNIST", "StanfordCars"])
    assert check(["--config", str(config)]) == 1
    out = capsys.readouterr().out
    cells = [line.split() for line in out.splitlines()]
    rows = {row[0]: row[1] for row in cells if row and row[0] in ("Aircraft", "MNIST", "StanfordCars")}
    assert rows == {"Aircraft": "ok*", "MNIST": "incomplete", "StanfordCars": "missing"}
    assert f"{tmp_path}/MNIST/raw/t10k-labels-idx1-ubyte" in out
    assert "can no longer download StanfordCars" in out
    assert "1 of 3 datasets usable" in out


def test_root_option_overrides_the_config(data_root, tmp_path, capsys):
    config = write_config(tmp_path / "b.yaml", tmp_path / "elsewhere", "mtil", ["DTD"])
    assert check(["--config", str(config), "--root", str(data_root)]) == 0


@pytest.mark.parametrize(
    ("data", "names", "message"),
    [
        ({"kind": "vtab", "root": "/x"}, ["DTD"], "config key data.kind: 'vtab' is not one of"),
        ({"kind": "mtil", "root": None}, ["DTD"], "data.root is not set"),
        ({"kind": "mini"}, ["shape"], "codyra data applies to data.kind mtil, xtail or trace"),
        (
            {"kind": "xtail", "root": "/x"},
            ["CIFAR100"],
            "tasks[0]: 'CIFAR100' is not a dataset of the xtail protocol",
        ),
    ],
)
def test_bad_configs_exit_with_a_message(tmp_path, capsys, data, names, message):
    config = config_dict(None, "mtil", names)
    config["data"] = data
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    assert check(["--config", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_deep_check_names_a_truncated_jpeg_the_plain_check_lets_pass(tmp_path, capsys):
    write_aircraft(tmp_path)
    images = sorted((tmp_path / "fgvc-aircraft-2013b" / "data" / "images").glob("*.jpg"))
    broken = images[4]
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])
    config = write_config(tmp_path / "b.yaml", tmp_path, "mtil", ["Aircraft"])
    assert check(["--config", str(config)]) == 0  # the file is there: the plain check opens no image
    capsys.readouterr()

    assert check(["--config", str(config), "--deep"]) == 1
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("Aircraft")).split()[1] == "incomplete"
    assert "Aircraft' (mtil): 1 image file(s) do not decode (corrupt or truncated)" in out
    assert f"    {broken} (" in out  # with PIL's error
    assert not any(str(image) in out for image in images if image != broken)
    assert "0 of 1 datasets usable" in out
