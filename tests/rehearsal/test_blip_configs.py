"""The BLIP paper config rehearsed at its smallest meaningful size, on a stand-in of BLIP's
architecture under the hub revision the config names (codyra.rehearsal.plan, test_clip_configs.py)."""

from __future__ import annotations

import json

from codyra.store.paths import tables_dir

from .conftest import check_tables, run


def test_blip_xtail_16shot_reads_the_weights_revision_it_names(folders):
    folder = folders["blip"]
    cfg = check_tables(folder, run("blip_xtail_16shot.yaml", folder))
    assert (folder / tables_dir(cfg) / "blip.md").is_file()
    digests = json.loads((folder / "results" / cfg["benchmark"] / "pretrain" / "weights-digest.json").read_text())
    assert any(name.startswith("Salesforce/blip-itm-base-coco@refs/pr/5") for name in digests)
