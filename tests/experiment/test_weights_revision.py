"""``model.revision``: the hub revision a Hugging Face theta_0 is read at is part of what a result
was computed from; an open_clip model has none."""

from __future__ import annotations

import copy

import pytest

from codyra.errors import ConfigError
from codyra.experiment.config import load_config
from codyra.experiment.fingerprints import eval_fingerprint, train_fingerprint
from codyra.experiment.weights import require_weights


@pytest.fixture(scope="module")
def blip():
    return load_config("config/blip_xtail_16shot.yaml")


def with_revision(cfg: dict, revision) -> dict:
    changed = copy.deepcopy(cfg)
    changed["model"]["revision"] = revision
    return changed


def test_the_blip_paper_config_reads_the_converted_revision(blip):
    assert blip["model"]["revision"] == "refs/pr/5"
    assert load_config("config/trace.yaml")["model"]["revision"] is None  # default: the main branch


def test_a_changed_revision_reruns_training_and_evaluation(blip):
    other = with_revision(blip, "refs/pr/6")
    assert train_fingerprint(other, "codyra", 1) != train_fingerprint(blip, "codyra", 1)
    assert eval_fingerprint(other, 1) != eval_fingerprint(blip, 1)


def test_the_main_branch_keeps_the_fingerprints_of_configs_written_before_the_key(blip):
    main = with_revision(blip, None)
    before = copy.deepcopy(main)
    del before["model"]["revision"]
    assert train_fingerprint(main, "codyra", 1) == train_fingerprint(before, "codyra", 1)
    assert eval_fingerprint(main, 2) == eval_fingerprint(before, 2)


def test_an_open_clip_model_refuses_a_revision():
    cfg = load_config("config/mtil_5shot.yaml")
    cfg["model"]["revision"] = "refs/pr/5"
    with pytest.raises(ConfigError, match="config key model.revision: 'refs/pr/5' is set, but an open_clip model"):
        require_weights(cfg)
