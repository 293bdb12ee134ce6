"""Config overlays: `extends: <base>` in a config file, for the CLI and the workflow."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from codyra.experiment.config import ConfigError, config_from_files, load_config, overlay, read_config_file

from ..conftest import TINY

CONFIG = Path(__file__).resolve().parents[2] / "config"


def write(path: Path, cfg: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_mappings_merge_and_every_other_value_replaces():
    base = {
        "train": {"lr": 1.0, "betas": [0.9, 0.99]},
        "tasks": ["a", "b"],
        "data": {"fewshot": 5, "root": "x"},
    }
    top = {"train": {"betas": [0.5]}, "tasks": ["c"], "data": {"fewshot": None}}
    assert overlay(base, top) == {
        "train": {"lr": 1.0, "betas": [0.5]},  # a list replaces, it is not appended to
        "tasks": ["c"],
        "data": {"fewshot": None, "root": "x"},  # null replaces too
    }
    assert base["train"]["betas"] == [0.9, 0.99]  # the base is not modified


def test_null_removes_an_inherited_mapping_and_replaces_anything_else():
    base = {"ablations": {"sweep": {"method": "codyra"}}, "analysis": {"paper_names": {"a": "A"}, "x": 1}, "n": 2}
    top = {"ablations": None, "analysis": {"paper_names": None}, "n": None}
    assert overlay(base, top) == {"analysis": {"x": 1}, "n": None}


def test_a_chain_of_bases_resolves_relative_to_each_file(tmp_path):
    write(tmp_path / "bases" / "root.yaml", {**TINY, "seeds": [0, 1, 2]})
    write(tmp_path / "bases" / "mid.yaml", {"extends": "root.yaml", "method_configs": {"codyra": {"kappa_max": 0.0}}})
    leaf = write(tmp_path / "leaf.yaml", {"extends": "bases/mid.yaml", "benchmark": "leaf", "tasks": TINY["tasks"][:2]})
    cfg = read_config_file(leaf)
    expected = copy.deepcopy(TINY) | {"seeds": [0, 1, 2], "benchmark": "leaf", "tasks": TINY["tasks"][:2]}
    expected["method_configs"]["codyra"]["kappa_max"] = 0.0
    assert cfg == expected
    assert load_config(leaf)["method_configs"]["codyra"] == {
        "kind": "codyra",
        "rank": 4,
        "dense_ratio": 0.5,
        "kappa_max": 0.0,
    }


def test_a_missing_base_names_the_file_that_extends_it(tmp_path):
    leaf = write(tmp_path / "leaf.yaml", {"extends": "nope.yaml", "benchmark": "x"})
    with pytest.raises(
        ConfigError, match=rf"config file {leaf}: extends {tmp_path / 'nope.yaml'}, which does not exist"
    ):
        read_config_file(leaf)


def test_a_cycle_of_extends_is_an_error(tmp_path):
    write(tmp_path / "a.yaml", {"extends": "b.yaml"})
    write(tmp_path / "b.yaml", {"extends": "a.yaml"})
    with pytest.raises(ConfigError, match=r"extend each other in a cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        read_config_file(tmp_path / "a.yaml")


@pytest.mark.parametrize("value", [None, 3, ["a.yaml"]])
def test_extends_must_be_a_path(tmp_path, value):
    leaf = write(tmp_path / "leaf.yaml", {"extends": value})
    with pytest.raises(ConfigError, match="extends must be the path of a base config file"):
        read_config_file(leaf)


def test_snakemake_configfiles_then_config_values(tmp_path):
    base = write(tmp_path / "base.yaml", TINY)
    variant = write(tmp_path / "v.yaml", {"extends": "base.yaml", "benchmark": "v"})
    cfg = config_from_files([variant], {"seeds": [3], "train": {"lr": 0.5}})
    assert cfg == overlay(read_config_file(base), {"benchmark": "v", "seeds": [3], "train": {"lr": 0.5}})


def resolved(name: str) -> dict:
    return load_config(CONFIG / f"{name}.yaml")


def without(cfg: dict, *keys: str) -> dict:
    out = copy.deepcopy(cfg)
    for key in keys:
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node[part]
        node.pop(leaf)
    return out


def test_paper_variants_differ_from_their_base_only_where_they_say():
    order1 = resolved("mtil_5shot")
    # order II: the same datasets in another order, each with its settings of order I
    assert without(resolved("mtil_5shot_order2"), "benchmark", "tasks") == without(order1, "benchmark", "tasks")
    assert sorted(resolved("mtil_5shot_order2")["tasks"]) == sorted(order1["tasks"])
    full = resolved("mtil_full")
    # full-shot MTIL's table has its own baselines: its own methods list, the prompt methods only it
    # compares (L2P, DualPrompt, DIKI); MoE-Adapters follows its full-shot script (per-task lr list,
    # iterations, the chooser's lr)
    differ = (
        "benchmark",
        "data.fewshot",
        "methods",
        "task_settings",
        "method_configs.moe-adapters",
    )
    own = ("method_configs.l2p", "method_configs.dualprompt", "method_configs.diki")
    assert without(full, *differ, *own) == without(order1, *differ)
    assert full["tasks"] == order1["tasks"]
    assert (full["data"]["fewshot"], order1["data"]["fewshot"]) == (None, 5)


def test_clip_paper_benchmarks_share_their_methods_and_training():
    base = read_config_file(CONFIG / "base" / "clip_paper.yaml")
    for name in ("mtil_5shot", "mtil_5shot_order2", "mtil_full", "xtail_16shot"):
        cfg = resolved(name)
        assert {key: cfg["train"][key] for key in base["train"]} == base["train"]
        # each table lists the base methods plus its own baselines (their options stay in the base)
        assert cfg["methods"][: len(base["methods"])] == base["methods"] and set(cfg["method_configs"]) >= set(
            base["method_configs"]
        )
    assert (
        resolved("mtil_5shot")["method_configs"]["codyra"]["dense_ratio"],
        resolved("xtail_16shot")["method_configs"]["codyra"]["dense_ratio"],
    ) == (0.7, 0.5)


def refusal(cfg: dict) -> list[str]:
    """The lines of the error that refuses ``cfg``."""
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    return str(err.value).splitlines()


def test_a_file_written_as_a_merge_says_how_to_extend_then_names_its_typo(tmp_path):
    path = write(tmp_path / "ov.yaml", {"methods": ["codyra"], "method_configs": {"codyra": {"kapa_max": 0.1}}})
    for raw in (config_from_files([path], {}), read_config_file(path)):  # the workflow's and the CLI's reading
        lines = refusal(raw)
        assert lines[0].startswith("the config has no benchmark, seeds, model, data, tasks: ")
        assert "replaces config/config.yaml, it is not merged into it" in lines[0]
        assert [line for line in lines if "extends" in line] == [lines[0]]
        assert "start the file with `extends: config/config.yaml`" in lines[0]
        typo = "  config key method_configs.codyra.kapa_max: no method kind has an option 'kapa_max'"
        assert lines[1:] == ["invalid configuration:", f"{typo} (did you mean 'kappa_max'?)"]


def test_an_overlay_is_refused_even_when_its_own_keys_are_right():
    lines = refusal({"seeds": [0], "method_configs": {"codyra": {"kappa_max": 0.1}}})
    assert len(lines) == 1 and lines[0].startswith("the config has no benchmark, methods, model, data, tasks: ")


def test_an_overlays_list_items_are_its_own_and_keep_their_missing_keys():
    lines = refusal(
        {"seeds": [0], "single_task": {"studies": {"s": {"task": "DTD", "sweeps": [{"vary": {"rank": [4]}}]}}}}
    )
    assert lines[1:] == [
        "invalid configuration:",
        "  config key single_task.studies.s.sweeps[0]: 'method' is a required property",
    ]


def test_a_full_config_without_one_key_says_which_after_the_misspelt_one():
    cfg = copy.deepcopy(TINY)
    cfg.pop("data")
    assert refusal(cfg) == ["invalid configuration:", "  config key <top level>: 'data' is a required property"]
    cfg = copy.deepcopy(TINY)
    cfg["model"].pop("name")
    cfg["train"]["lrr"] = 0.1
    assert refusal(cfg) == [
        "invalid configuration:",
        "  config key train.lrr: unknown key; did you mean 'lr'?",
        "  config key model: 'name' is a required property",
    ]


def test_a_full_configs_misspelt_option_is_named_beside_its_schema_errors():
    cfg = copy.deepcopy(TINY)
    cfg["train"]["lr"] = "fast"
    cfg["method_configs"]["codyra"]["kapa_max"] = 0.1
    lines = refusal(cfg)
    assert len(lines) == 3 and lines[2] == "  config key train.lr: 'fast' is not of type 'number'"
    assert lines[1].startswith("  config key method_configs.codyra.kapa_max: method kind 'codyra' has no option")
    assert lines[1].endswith("(did you mean 'kappa_max'?)")


def test_a_variant_appends_a_task_by_name_and_keeps_every_task_s_settings(tmp_path):
    base = read_config_file(CONFIG / "mtil_5shot.yaml")
    leaf = write(
        tmp_path / "appended.yaml",
        {
            "extends": str(CONFIG / "mtil_5shot.yaml"),
            "benchmark": "mtil-5shot-plus",
            "tasks": [*base["tasks"][1:], "Aircraft"],  # Aircraft moved to the end, by name
            "task_settings": {"Aircraft": {"methods": {"codyra": {"dense_ratio": 0.5}}}},
        },
    )
    cfg = read_config_file(leaf)
    aircraft = cfg["task_settings"]["Aircraft"]["methods"]
    assert aircraft["codyra"] == {"dense_ratio": 0.5}
    assert aircraft["zscl"] == base["task_settings"]["Aircraft"]["methods"]["zscl"]  # the base's, not restated
    assert {k: v for k, v in cfg["task_settings"].items() if k != "Aircraft"} == {
        k: v for k, v in base["task_settings"].items() if k != "Aircraft"
    }


def test_null_drops_a_setting_the_base_gives_a_task():
    full = read_config_file(CONFIG / "mtil_full.yaml")
    five = read_config_file(CONFIG / "mtil_5shot.yaml")
    assert "moe-adapters" in five["task_settings"]["Caltech101"]["methods"]
    assert "moe-adapters" not in full["task_settings"]["Caltech101"]["methods"]  # moe-adapters: null there
    assert read_config_file(CONFIG / "mtil_5shot_uniform.yaml").get("task_settings") is None
