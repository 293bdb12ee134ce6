"""The CLIP baselines' settings in the paper configs, against their references as run."""

from __future__ import annotations

from pathlib import Path

import pytest

from codyra.config import load_config, resolve_job

CONFIG = Path(__file__).resolve().parents[1] / "config"
PAPER = ("mtil_5shot", "mtil_5shot_order2", "mtil_full", "xtail_16shot")


def paper(name: str) -> dict:
    return load_config(CONFIG / f"{name}.yaml")


@pytest.mark.parametrize("name", [*PAPER, "mini_baselines"])
def test_rail_fuses_with_weight_0_8_as_rails_config(name):
    """linghan1997/Regression-based-Analytic-Incremental-Learning configs/analytic_clip.yaml:
    fusion_weight 0.8 (since its commit of 2024-10-23; 0.9 before)."""
    from codyra.methods.rail import RAILOptions

    cfg = paper(name)
    rails = [m for m, spec in cfg["method_configs"].items() if spec["kind"] in ("rail", "codyra_rail")]
    assert rails
    for method in rails:
        assert cfg["method_configs"][method]["fusion_weight"] == 0.8
    assert RAILOptions().fusion_weight == 0.8 and RAILOptions().prompts == "rail"
