"""theta_0's weights are verified wherever they are loaded: a poisoned, changed or unrecorded
file is named with the job to rerun, never used."""

from __future__ import annotations

import math
import shutil

import pytest

import codyra.clip.model as clip_model
from codyra.cli import main
from codyra.clip.model import HubFile, pretrained_clip
from codyra.experiment.config import load_config
from codyra.experiment.pretraining import pretrain_own
from codyra.experiment.train_job import train_task
from codyra.store.io import ResultError, read_json
from codyra.store.paths import MINI_PRETRAINED, WEIGHTS_DIGEST, cell_path, results_path
from codyra.store.theta0 import file_sha256
from tests.conftest import write_yaml
from tests.reliability.test_integrity import overwrite_value

TENSOR = "visual.conv1.weight"  # a tensor of the mini CLIP every forward reads


@pytest.fixture
def own_mini(tiny_cfg_dict, tmp_path):
    """A tiny mini benchmark with its own pretrained theta_0, and its config file."""
    raw = {**tiny_cfg_dict, "tracking": {"enabled": False}}
    cfg = load_config(raw)
    pretrain_own(cfg)
    return cfg, write_yaml(tmp_path / "mini.yaml", raw)


def test_the_mini_pretraining_records_the_digest_of_theta_0(own_mini):
    cfg, _ = own_mini
    weights = results_path(cfg, MINI_PRETRAINED)
    assert read_json(results_path(cfg, WEIGHTS_DIGEST)) == {"model.safetensors": file_sha256(weights)}
    pretrained_clip(cfg)


def test_poisoned_mini_theta_0_is_refused_by_every_job(own_mini, capsys):
    cfg, config_file = own_mini
    train_task(cfg, "codyra", 0, 1)
    weights = results_path(cfg, MINI_PRETRAINED)
    overwrite_value(weights, TENSOR, 0, math.nan)  # the header stays valid: the file still parses
    message = (
        rf"theta_0 {weights} changed since its pretraining wrote it "
        rf".*rerun the mini pretraining \(snakemake -f {weights}, or codyra pretrain-mini"
    )
    with pytest.raises(ResultError, match=message):
        pretrained_clip(cfg)
    for cell in (["--method", "codyra", "--seed", "0", "--i", "1"], ["--method", "pretrained", "--i", "0"]):
        assert main(["cell", "--config", config_file, *cell, "--j", "1"]) == 2
        err = capsys.readouterr().err
        assert f"theta_0 {weights} changed since its pretraining wrote it" in err and "Traceback" not in err
    assert not cell_path(cfg, "codyra", 0, 1, 1).exists()
    with pytest.raises(ResultError, match=message):
        train_task(cfg, "codyra", 0, 2)


def test_mini_theta_0_without_its_digest_is_refused(own_mini):
    cfg, _ = own_mini
    results_path(cfg, WEIGHTS_DIGEST).unlink()
    with pytest.raises(
        ResultError, match=r"model.safetensors has no digest in .*weights-digest.json.*codyra pretrain-mini"
    ):
        pretrained_clip(cfg)


def given_weights(tiny_run, tmp_path):
    """A copy of the session's tiny theta_0 as model.pretrained (weights the benchmark did not write)."""
    weights = tmp_path / "given" / "clip.safetensors"
    weights.parent.mkdir()
    shutil.copy(tiny_run["model"]["pretrained"], weights)
    tiny_run["model"]["pretrained"] = str(weights)
    return weights


def test_given_weights_are_recorded_at_first_use_and_checked_after(tiny_run, tmp_path):
    weights = given_weights(tiny_run, tmp_path)
    record = results_path(tiny_run, WEIGHTS_DIGEST)
    assert not record.exists()
    pretrained_clip(tiny_run)
    assert read_json(record) == {str(weights): file_sha256(weights)}
    pretrained_clip(tiny_run)

    overwrite_value(weights, TENSOR, 0, 0.25)  # finite, but not the weights the results were computed from
    with pytest.raises(
        ResultError,
        match=(
            rf"pretrained weights {weights} \({weights}\) changed since this benchmark first used them"
            rf".*delete {record}"
        ),
    ) as err:
        pretrained_clip(tiny_run)
    assert f"restore {weights}" in str(err.value)
    record.unlink()  # a deliberate change: accepted, and recorded anew
    pretrained_clip(tiny_run)
    assert read_json(record) == {str(weights): file_sha256(weights)}


def test_non_finite_weights_are_refused_at_first_use_and_not_recorded(tiny_run, tmp_path):
    weights = given_weights(tiny_run, tmp_path)
    overwrite_value(weights, TENSOR, 3, math.inf)
    with pytest.raises(
        ResultError, match=rf"theta_0 {weights} holds non-finite values in 1 tensor\(s\) \(e.g. {TENSOR}\)"
    ):
        pretrained_clip(tiny_run)
    assert not results_path(tiny_run, WEIGHTS_DIGEST).exists()


def test_open_clip_tag_weights_are_recorded_at_first_use_and_checked_after(tiny_run, tmp_path, monkeypatch):
    cached = given_weights(tiny_run, tmp_path)
    tiny_run["model"]["pretrained"] = "mytag"
    monkeypatch.setattr(clip_model, "pretrained_file", lambda name, tag, cache_dir=None: cached)
    monkeypatch.setattr(clip_model, "pretrained_tag_config", lambda name, tag: {})
    monkeypatch.setattr(clip_model, "hub_file", lambda name, tag: HubFile("org/clip", "open_clip_model.safetensors"))
    pretrained_clip(tiny_run)
    name = "open_clip codyra-mini mytag: org/clip/open_clip_model.safetensors"
    assert read_json(results_path(tiny_run, WEIGHTS_DIGEST)) == {name: file_sha256(cached)}

    overwrite_value(cached, TENSOR, 1, -3.0)
    with pytest.raises(
        ResultError,
        match=(
            rf"pretrained weights {cached} \({name}\) changed.*delete the cached file {cached} and fetch it again "
            r"\(codyra fetch-weights --model codyra-mini --pretrained mytag"
        ),
    ):
        pretrained_clip(tiny_run)
