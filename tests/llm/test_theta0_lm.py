"""A causal LM's theta_0 is verified wherever it is loaded: the mini TRACE's against the digest
its pretraining wrote, a given model folder's against the one recorded at its first use."""

from __future__ import annotations

import copy
import math
import shutil

import pytest

from codyra.experiment.config import load_config
from codyra.llm.model import mini_model_dir, pretrained_lm
from codyra.store.io import ResultError, read_json
from codyra.store.paths import WEIGHTS_DIGEST, results_path
from codyra.store.theta0 import DIGEST_FILE, file_sha256
from tests.llm.conftest import TINY_TRACE
from tests.reliability.test_integrity import overwrite_value

TENSOR = "model.embed_tokens.weight"


def test_poisoned_mini_trace_theta_0_is_refused(tiny_trace_theta0, tmp_path):
    data_root, theta0 = tiny_trace_theta0
    assert read_json(theta0 / DIGEST_FILE) == {"model.safetensors": file_sha256(theta0 / "model.safetensors")}
    cfg = load_config(
        {
            **copy.deepcopy(TINY_TRACE),
            "results": str(tmp_path / "results"),
            "data": {"kind": "trace", "root": str(data_root)},
        }
    )
    own = mini_model_dir(cfg)
    shutil.copytree(theta0, own)  # as the workflow's pretraining leaves it
    pretrained_lm(cfg)
    overwrite_value(own / "model.safetensors", TENSOR, 7, math.nan)
    with pytest.raises(
        ResultError,
        match=rf"theta_0 {own / 'model.safetensors'} changed since its pretraining wrote it .*codyra pretrain-mini",
    ):
        pretrained_lm(cfg)


def test_given_model_folder_is_recorded_at_first_use_and_checked_after(tiny_trace, tiny_trace_theta0, tmp_path):
    given = tmp_path / "given-model"
    shutil.copytree(tiny_trace_theta0[1], given)
    cfg = {**tiny_trace, "model": {**tiny_trace["model"], "pretrained": str(given)}}
    weights, record = given / "model.safetensors", results_path(cfg, WEIGHTS_DIGEST)
    pretrained_lm(cfg)
    assert read_json(record) == {str(weights): file_sha256(weights)}

    overwrite_value(weights, TENSOR, 7, math.nan)
    with pytest.raises(
        ResultError,
        match=(
            rf"pretrained weights {weights} .* changed since this benchmark first used them"
            rf".*restore the model folder {given}.*delete {record}"
        ),
    ):
        pretrained_lm(cfg)
    record.unlink()
    with pytest.raises(
        ResultError, match=rf"theta_0 {given} holds non-finite values in 1 tensor\(s\) \(e.g. {TENSOR}\)"
    ):
        pretrained_lm(cfg)
    assert not record.exists()  # weights that never loaded are not recorded


def test_hub_model_is_recorded_at_first_use_by_repository_and_file(
    tiny_trace, tiny_trace_theta0, tmp_path, monkeypatch
):
    import codyra.llm.model as lm_model

    cache = tmp_path / "hub"
    snapshot = cache / "models--org--tiny-llama" / "snapshots" / "0123abcd"
    shutil.copytree(tiny_trace_theta0[1], snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(lm_model, "pretrained_source", lambda cfg: ("org/tiny-llama", False))
    cfg = {**tiny_trace, "model": {**tiny_trace["model"], "cache_dir": str(cache)}}
    pretrained_lm(cfg)  # read by hub id from the cache's snapshot of main
    record = results_path(cfg, WEIGHTS_DIGEST)
    assert read_json(record) == {"org/tiny-llama: model.safetensors": file_sha256(snapshot / "model.safetensors")}

    overwrite_value(snapshot / "model.safetensors", TENSOR, 2, 0.5)
    with pytest.raises(
        ResultError,
        match=(
            r"\(org/tiny-llama: model.safetensors\) changed since this benchmark first used them"
            rf".*delete {snapshot} and fetch org/tiny-llama again \(codyra fetch-weights --model org/tiny-llama"
        ),
    ):
        pretrained_lm(cfg)
