"""Each analysis is declared once: when it applies and why not, what it reads, how it runs; the
workflow's input sets cover what every analysis reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codyra.analysis.registry import ANALYSES, INPUT_SETS, Analysis, available, skipped
from codyra.experiment.config import load_config

from ..conftest import ROOT, TINY


def test_every_config_splits_the_analyses_into_those_that_apply_and_those_skipped_with_a_reason():
    for config in ("config.yaml", "mini_ablations.yaml", "mini_trace.yaml", "xtail_16shot.yaml"):
        cfg = load_config(f"{ROOT}/config/{config}")
        why = skipped(cfg)
        assert set(available(cfg)) | set(why) == set(ANALYSES), config
        assert not set(available(cfg)) & set(why), config
        assert all(isinstance(reason, str) and reason for reason in why.values()), config


def test_an_analysis_without_what_it_needs_names_why():
    only_zero_shot = load_config({**TINY, "results": "unused", "methods": ["zeroshot"]})
    why = skipped(only_zero_shot)
    assert why["drift"] == "no method of the config trains: there is no update to analyse"
    assert why["rank"].startswith("no method of the config stores a low-rank update")
    one_task = load_config({**TINY, "results": "unused", "tasks": ["colour"]})
    assert skipped(one_task)["orth"] == "the stream has one task: there is no pair of tasks to compare"
    assert "orth" not in skipped(load_config({**TINY, "results": "unused"}))


def test_the_workflow_turns_every_input_set_into_files():
    text = Path(f"{ROOT}/workflow/rules/analysis.smk").read_text()
    block = text[text.index("INPUT_FILES = {") : text.index("\n}\n", text.index("INPUT_FILES = {"))]
    assert set(re.findall(r'^    "([^"]+)":', block, re.MULTILINE)) == set(INPUT_SETS)


def test_an_analysis_reading_an_unknown_input_set_is_refused():
    with pytest.raises(ValueError, match=r"analysis x reads \['updates'\], which are not among"):
        Analysis("x", "", "drift", ("updates",), lambda cfg: None, lambda cfg, m: ([], []), lambda cfg, m: None)


def test_the_jobs_that_read_stored_updates_are_cpu_jobs_and_the_rest_run_in_snakemake():
    reads_updates = {n for n, a in ANALYSES.items() if {"trained updates", "adapter updates"} & set(a.reads)}
    assert {n for n, a in ANALYSES.items() if a.cpu_job} == reads_updates - {"cost"}  # cost reads sizes only
