"""Every table the workflow declares has its own report caption, for every shipped config."""

from __future__ import annotations

from functools import cache

import pytest

from codyra.evaluation.tables import table_names
from codyra.experiment.config import config_from_files, load_config

from .conftest import REPO

CAPTIONS = REPO / "workflow" / "report" / "tables"
CONFIGS = sorted(p.name for p in (REPO / "config").glob("*.yaml"))


@cache
def tables_of(config: str) -> list[str]:
    return table_names(load_config(config_from_files([REPO / "config" / config], {})))


def caption_file(table: str):
    # the per-method matrices A_<method> share one caption; every other table has its own
    return CAPTIONS / f"{'A_method' if table.startswith('A_') else table}.rst"


@pytest.mark.parametrize("config", CONFIGS)
def test_each_table_has_its_own_caption(config):
    for table in tables_of(config):
        assert caption_file(table).is_file(), f"{table} of {config} has no caption {caption_file(table)}"


def test_no_caption_is_left_without_a_table():
    made = {caption_file(t).name for config in CONFIGS for t in tables_of(config)}
    assert {p.name for p in CAPTIONS.glob("*.rst")} == made
