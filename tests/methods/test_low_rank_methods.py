"""What a method kind declares it stores (``stores_low_rank_update``) decides which runs the
low-rank analyses (rank activation, A-orthogonality, amplification) read: LAE and CL-LoRA have a
``rank`` option but store no low-rank update, so no analysis job is planned for them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codyra.analysis.common import adapter_methods, trained_methods
from codyra.analysis.registry import available, outputs
from codyra.experiment.config import load_config
from codyra.methods import method_class
from codyra.methods.lora import LoRA

ROOT = Path(__file__).resolve().parents[2]
STORE_OTHER_THINGS = ("lae", "cl_lora")  # a rank option, no low-rank update (TaskUpdate "none")
LOW_RANK_KINDS = {  # the kinds whose finish stores TaskUpdate("lora", A, B, w) (codyra.methods.lora.LoRA.finish)
    *("lora", "codyra", "codyra_dagger", "codyra_rail", "seqlora", "ogd", "olora", "hidelora", "treelora"),
    *("inflora", "adalora", "dylora", "sora"),
}


@pytest.mark.parametrize("kind", sorted(LOW_RANK_KINDS))
def test_kinds_over_lora_declare_their_factors(kind):
    assert issubclass(method_class(kind), LoRA) and method_class(kind).stores_low_rank_update


@pytest.mark.parametrize("kind", [*STORE_OTHER_THINGS, "full", "ewc", "l2p", "rail", "zeroshot"])
def test_kinds_storing_other_things_do_not(kind):
    assert not method_class(kind).stores_low_rank_update


def test_xtail_plans_the_low_rank_analyses_without_lae_and_cl_lora():
    cfg = load_config(ROOT / "config" / "xtail_16shot.yaml")
    kinds = {m: cfg["method_configs"][m]["kind"] for m in cfg["methods"]}
    assert {"lae", "cl-lora"} <= set(trained_methods(cfg))
    low_rank = adapter_methods(cfg)
    assert set(low_rank) == {m for m, k in kinds.items() if k in LOW_RANK_KINDS}
    assert "lae" not in low_rank and "cl-lora" not in low_rank
    assert {"rank", "amplification", "orth"} <= set(available(cfg))
    _, figures = outputs(cfg, "amplification")
    assert {f.rsplit("_seed", 1)[0] for f in figures} == {f"amplification_{m}" for m in low_rank}


@pytest.mark.slow
def test_mini_baselines_paper_dry_run_has_no_rank_job_for_lae_or_cl_lora(tmp_path):
    from codyra.yaml_loader import load_yaml
    from tests.workflow.conftest import job_counts, snakemake

    cfg = load_yaml((ROOT / "config" / "mini_baselines.yaml").read_text())
    cfg["extends"] = str(ROOT / "config" / cfg["extends"])
    cfg["results"] = str(tmp_path / "results")
    out = snakemake(tmp_path, cfg, "-n", "paper", "--config", "check_data=False").stdout
    ranked = set(re.findall(r"tables/mini/rank_([\w.-]+)\.md", out))
    full = load_config(ROOT / "config" / "mini_baselines.yaml")
    assert ranked == {m for m in full["methods"] if full["method_configs"][m]["kind"] in LOW_RANK_KINDS}
    assert "lae" not in ranked and "cl-lora" not in ranked and job_counts(out)["analysis_rank"] == len(ranked)
