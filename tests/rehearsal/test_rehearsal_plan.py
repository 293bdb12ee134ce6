"""What a rehearsal changes in a paper config (sizes only) and in the SLURM profile (site values only)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from codyra.experiment.config import load_config, overlay, read_config_file
from codyra.experiment.resolve import resolve_job
from codyra.rehearsal.plan import CHECKPOINT_EVERY, ENSEMBLE_EVERY, HIDDEN_DIM, ITERATIONS, changes, shrink
from codyra.rehearsal.run import LOCAL_SITE, site_profile
from codyra.yaml_loader import load_yaml

REPO = Path(__file__).resolve().parents[2]


def raw(name: str, **sets) -> dict:
    cfg = read_config_file(REPO / "config" / name)
    cfg.update(sets)
    return cfg


def test_small_xtail_keeps_every_method_and_setting_but_the_sizes():
    written = raw("xtail_16shot.yaml")
    small = shrink(written)
    assert small["seeds"] == [0] and list(small["tasks"]) == ["Aircraft", "Caltech101"]
    assert small["methods"] == written["methods"]  # every method
    # the per-task values of the kept tasks stay, their steps capped: CL-LoRA's 2,250 iterations -> 4
    assert small["task_settings"]["Aircraft"]["methods"]["cl-lora"] == {"train": {"iterations": ITERATIONS}}
    assert (
        small["task_settings"]["Aircraft"]["methods"]["zscl"] == written["task_settings"]["Aircraft"]["methods"]["zscl"]
    )
    assert set(small["task_settings"]) == {"Aircraft", "Caltech101"}  # the settings of the tasks left out go
    zscl = small["method_configs"]["zscl"]
    assert zscl["train"]["iterations"] == ITERATIONS and zscl["train"]["warmup_steps"] == 1
    assert zscl["ensemble_every"] == ENSEMBLE_EVERY and zscl["train"]["lr"] == 1e-5
    assert small["method_configs"]["rail-primal"]["hidden_dim"] == HIDDEN_DIM  # RAIL's 15,000: a size
    assert small["method_configs"]["rail-primal"]["gamma"] == 0.1  # its regularisation: a setting
    assert small["train"]["lr"] == written["train"]["lr"] and small["train"]["batch_size"] == 64
    assert small["train"]["checkpoint_every"] == CHECKPOINT_EVERY and small["train"]["threads"] == 1
    assert small["ablations"]["initial_rank"]["zip"] == {"rank": [4], "alpha": [4]}
    studies = small["single_task"]["studies"]
    assert studies.keys() == written["single_task"]["studies"].keys()  # every study, each sweep's first value
    assert studies["supp_dtd"]["sweeps"][0]["vary"] == {"placement": ["attn"]}
    # the norm-matched run's targets: those of its sweep's runs that remain (r = 1 of 1, 2, 4, 8, 16)
    assert small["method_configs"]["lora-norm-matched"]["norm_target"] == ["lora-r16-rank-1-alpha-1"]
    load_config(copy.deepcopy(small))  # valid as it is
    assert written["task_settings"]["Aircraft"]["methods"]["cl-lora"]["train"]["iterations"] == 2250  # input untouched


def test_full_size_keeps_every_task_seed_and_sweep_value():
    written = raw("xtail_16shot.yaml")
    full = shrink(written, full=True)
    assert full["seeds"] == written["seeds"] and len(full["tasks"]) == 10
    assert full["ablations"] == written["ablations"]
    assert full["task_settings"]["SUN397"]["methods"]["cl-lora"]["train"]["iterations"] == ITERATIONS


def test_trace_rehearses_zero2_bf16_on_two_ranks_with_its_epochs():
    written = raw("trace.yaml", backbone="gemma-2b-it")
    small = shrink(written)
    assert small["llm"]["deepspeed"] == {"enabled": True, "nproc": 2}
    assert small["llm"]["max_new_tokens"] == 8 and small["train"]["precision"] == "bf16"
    assert small["tasks"] == written["tasks"][:2]  # epochs (per task and method) are kept
    cfg = load_config(copy.deepcopy(small))
    assert cfg["benchmark"] == "trace-gemma-2b-it"
    job = resolve_job(cfg, "ewc", 1)["train"]
    assert (job["epochs"], job["lr"], job["gradient_accumulation"]) == (1, 1e-5, 8)


def test_changes_are_an_overlay_that_gives_back_the_shrunk_config():
    written = raw("mtil_5shot.yaml")
    small = shrink(written)
    diff = changes(written, small)
    assert overlay(written, diff) == small
    assert "methods" not in diff and "model" not in diff  # what is not shrunk is not restated
    assert diff["seeds"] == [0] and len(diff["tasks"]) == 2


def test_site_profile_replaces_the_site_values_and_nothing_else(tmp_path):
    source = load_yaml((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    out = site_profile(REPO / "profiles" / "slurm", tmp_path / "profile", jobs=2)
    site = load_yaml((out / "config.yaml").read_text())
    assert site["default-resources"]["slurm_partition"] == LOCAL_SITE["slurm_partition"]
    assert site["slurm-status-command"] == "squeue" and site["slurm-no-account"] is True and site["jobs"] == 2
    assert "slurm_account" not in site["default-resources"]
    for rule, resources in source["set-resources"].items():  # every rule's sizes as the profile states them
        for key in ("gpu", "mem_mb", "runtime", "nodes"):
            assert site["set-resources"][rule].get(key) == resources.get(key), (rule, key)


def test_site_profile_refuses_a_site_value_it_cannot_set(tmp_path):
    profile = tmp_path / "config.yaml"
    profile.write_text("default-resources:\n  slurm_qos: normal   # SITE: your QOS\n")
    with pytest.raises(Exception, match="slurm_qos"):
        site_profile(profile, tmp_path / "out", jobs=2)


def test_a_sites_own_partition_names_become_the_local_clusters(tmp_path):
    profile = tmp_path / "config.yaml"
    profile.write_text(
        "default-resources:\n"
        '  slurm_partition: "gpu-h100"   # SITE: GPU partition\n'
        '  cpu_partition: &cpu "long"   # SITE: CPU partition\n'
        '  gpu_model: "nvidia_h100"     # SITE: GRES type\n'
        "set-resources:\n"
        "  eval_cache: {slurm_partition: *cpu, gpu: 0}\n"
        "  train_lm_task: {gpu: 4}\n"
    )
    site = load_yaml((site_profile(profile, tmp_path / "out", jobs=2) / "config.yaml").read_text())
    assert site["default-resources"] == {"slurm_partition": "gpu", "cpu_partition": "cpu", "gpu_model": "h100"}
    assert site["set-resources"]["eval_cache"] == {"slurm_partition": "cpu", "gpu": 0}
    assert site["set-resources"]["train_lm_task"] == {"gpu": 4}


def test_a_config_without_the_sweeps_keeps_the_norm_targets_it_does_not_run():
    written = raw("blip_xtail_16shot.yaml")  # extends X-TAIL and drops its ablations and studies
    small = shrink(written)
    assert (
        small["method_configs"]["lora-norm-matched"]["norm_target"]
        == written["method_configs"]["lora-norm-matched"]["norm_target"]
    )
    load_config(copy.deepcopy(small))
