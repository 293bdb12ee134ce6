"""theta_0's weights before a grid starts: what a config reads, whether it is in the weights cache
(checked when the DAG is built, without the network), and fetching it (``codyra fetch-weights --config``).

A config reads an open_clip tag's file (CLIP), a hub model at ``model.revision`` (causal LMs, BLIP),
a local file or folder (``model.pretrained``), or nothing: a mini benchmark's pretraining job writes
its own theta_0.
"""

from __future__ import annotations

from pathlib import Path

from codyra.family import family_of


def source(cfg: dict) -> tuple[str, str] | None:
    """What theta_0 is read from: ("tag", an open_clip tag), ("file", a safetensors file), ("hub", a hub
    id), ("folder", a Hugging Face model folder), or None for a mini benchmark's own pretraining and a CLIP
    without pretrained weights."""
    family, m = family_of(cfg), cfg["model"]
    if family.own_pretraining(cfg) is not None:
        return None
    if family.name == "clip":  # open_clip: model.pretrained is a tag or a file, model.name the architecture
        from codyra.clip.model import check_no_revision, is_weights_path

        check_no_revision(cfg)
        if m["pretrained"] is None:
            return None
        return ("file", m["pretrained"]) if is_weights_path(m["pretrained"]) else ("tag", m["pretrained"])
    if m["pretrained"] is not None:  # Hugging Face: a local folder, else model.name (a hub id or a folder)
        return "folder", m["pretrained"]
    return ("folder", m["name"]) if Path(m["name"]).expanduser().is_dir() else ("hub", m["name"])


def require_weights(cfg: dict) -> None:
    """Refuse a config whose theta_0 is missing, before any job runs: a hub model or an open_clip tag
    not in the weights cache (the error names the exact ``codyra fetch-weights`` command), a local
    file or folder that is not there. Reads no weights and never touches the network."""
    from codyra import hub

    found = source(cfg)
    if found is None:
        return
    kind, where = found
    m = cfg["model"]
    if kind == "tag":
        from codyra.clip.model import cached_tag_file

        cached_tag_file(m["name"], where, m["cache_dir"])
    elif kind == "hub":
        hub.require_cached(where, m["revision"], m["cache_dir"])
    else:
        key = "model.pretrained" if m["pretrained"] is not None else "model.name"
        if not Path(where).expanduser().exists():
            raise FileNotFoundError(f"config key {key}: theta_0 {where} does not exist")
        if kind == "folder" and hub.weight_files(Path(where).expanduser()) is None:
            raise FileNotFoundError(
                f"config key {key}: {where} holds no safetensors weights (model.safetensors, or "
                "model.safetensors.index.json and its shards); codyra never loads pickled weights"
            )


def fetch_config_weights(cfg: dict, cache_dir: str | None = None) -> str:
    """Fetch the theta_0 a config reads into its weights cache (``cache_dir``, else ``model.cache_dir``)
    and check it loads; returns what was done, for the user."""
    found = source(cfg)
    if found is None:
        return f"{cfg['benchmark']}: theta_0 is pretrained by the workflow (or random): nothing to fetch"
    kind, where = found
    m = cfg["model"]
    cache = cache_dir or m["cache_dir"]
    if kind == "tag":
        from codyra.clip.model import fetch_weights

        return f"{cfg['benchmark']}: {m['name']} / {where} weights: {fetch_weights(m['name'], where, cache)}"
    if kind == "hub":
        from codyra.hub import hub_label
        from codyra.llm.model import fetch_hub_model

        folder = fetch_hub_model(where, m["revision"], cache)
        return f"{cfg['benchmark']}: {hub_label(where, m['revision'])}: {folder}"
    require_weights(cfg)
    return f"{cfg['benchmark']}: theta_0 is the local {where}: nothing to fetch"
