"""Weights from the Hugging Face hub, kept in the hub's cache layout (``models--org--name/{blobs,refs,
snapshots}``) under ``model.cache_dir`` (default ``$HF_HUB_CACHE``): where they are, which files codyra
fetches, and errors that name the fix.

Compute nodes often have no internet: there the cache is filled once, on a machine that has it, by
``codyra fetch-weights``, and the jobs run with ``HF_HUB_OFFLINE=1`` (:func:`offline_by_default`), so a
missing file fails at once with that command instead of waiting on the network. A cached model is read
without touching the network whatever ``HF_HUB_OFFLINE`` says.

A model is read at one revision (config key ``model.revision``; None: the repository's ``main``), from
the snapshot folder of that revision, which holds exactly what the loaders read: the same folder is
loaded and verified (:mod:`codyra.store.theta0`). Light: no torch, no transformers.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from codyra.errors import WeightsUnavailableError

# What a loader reads from a hub model: safetensors weights (one file or the shards of an index),
# the model and generation configs, the tokenizer's and the image processor's files. Anything else
# in a repository (pickled *.bin, TensorFlow *.h5, Flax *.msgpack, original/*.pth, *.gguf, docs) is
# never fetched. Patterns match the whole path, so files in sub-folders (original/) match none.
FETCH_PATTERNS = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*-of-*.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "preprocessor_config.json",
    "processor_config.json",
)
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"


def offline_by_default() -> None:
    """Set ``HF_HUB_OFFLINE=1`` in this process (and those it starts) unless the user set it (to 0 or 1).
    For jobs on compute nodes: they read the weights cache and never wait on the network."""
    if "HF_HUB_OFFLINE" in os.environ:
        return
    os.environ["HF_HUB_OFFLINE"] = "1"
    if "huggingface_hub.constants" in sys.modules:  # it reads the variable once, when imported
        sys.modules["huggingface_hub.constants"].HF_HUB_OFFLINE = True


def cache_path(cache_dir: str | None) -> str:
    """The cache weights are read from and fetched into (``model.cache_dir``, else ``$HF_HUB_CACHE``)."""
    from huggingface_hub import constants

    return str(Path(cache_dir).expanduser().absolute()) if cache_dir else constants.HF_HUB_CACHE


def is_offline() -> bool:
    from huggingface_hub import constants

    return constants.is_offline_mode()


def fetch_command(model: str, cache_dir: str | None, *, pretrained: str | None = None, revision: str | None = None):
    """The command that fills the cache with a model (an open_clip model and tag, or a hub id and revision)."""
    options = f" --pretrained {pretrained}" if pretrained else ""
    options += f" --revision {revision}" if revision else ""
    return f"codyra fetch-weights --model {model}{options} --cache-dir {cache_path(cache_dir)}"


def hub_label(repo_id: str, revision: str | None) -> str:
    """A hub model's name in messages and digest records: its id, and its revision unless ``main``."""
    return f"{repo_id}@{revision}" if revision else repo_id


def weight_files(folder: Path) -> list[Path] | None:
    """The safetensors weights of a model folder (the shards its index names, else
    ``model.safetensors``), or None when any of them is absent."""
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        shards = [folder / name for name in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
        return shards if all(f.is_file() for f in shards) else None
    return [folder / SAFETENSORS] if (folder / SAFETENSORS).is_file() else None


def revision_hint(repo_id: str) -> str:
    return (
        "set config key model.revision to a revision that holds model.safetensors: the hub's automatic "
        "conversion publishes one as a pull request, revision refs/pr/<N> (see the repository's Community tab on "
        f"https://huggingface.co/{repo_id}); or convert the weights once (load them, save_pretrained with "
        "safetensors) and set model.pretrained to that local folder. codyra never loads pickled weights"
    )


def no_safetensors_error(repo_id: str, revision: str | None, folder: Path) -> WeightsUnavailableError:
    return WeightsUnavailableError(
        f"{repo_id} at revision {revision or 'main'} holds no safetensors weights ({SAFETENSORS} or "
        f"{SAFETENSORS_INDEX} and its shards; fetched into {folder}): {revision_hint(repo_id)}"
    )


def cached_snapshot(repo_id: str, revision: str | None, cache_dir: str | None) -> Path | None:
    """The cached snapshot folder of ``repo_id`` at ``revision``, without the network; None if not cached."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=cache_path(cache_dir),
            allow_patterns=list(FETCH_PATTERNS),
            local_files_only=True,
        )
    except LocalEntryNotFoundError:  # not cached, or a snapshot its cached file list shows incomplete
        return None
    return Path(folder)


def access_error(repo_id: str, err: Exception) -> str:
    """Why the hub refused ``repo_id`` and what to do: a gated model (LLaMA, Gemma) needs a token of an
    account that has accepted its licence."""
    from huggingface_hub import get_token
    from huggingface_hub.errors import GatedRepoError

    login = "export HF_TOKEN=<token> (a read token from https://huggingface.co/settings/tokens) or run `hf auth login`"
    if isinstance(err, GatedRepoError) and get_token() is not None:
        return (
            f"{repo_id} is a gated model and the Hugging Face token in use has no access to it: accept its "
            f"licence on https://huggingface.co/{repo_id} with the account of that token (HF_TOKEN or "
            "`hf auth login`), wait for the access to be granted, then fetch again"
        )
    if get_token() is None:
        return (
            f"the hub refused {repo_id} and no Hugging Face token is set: a gated model (LLaMA, Gemma) needs the "
            f"token of an account that has accepted its licence on https://huggingface.co/{repo_id}; {login}. "
            "Otherwise check the id (config key model.name)"
        )
    return (
        f"the hub has no repository {repo_id} that the token in use can read ({type(err).__name__}): check the id "
        f"(config key model.name) and, for a gated or private model, that the token's account has access ({login})"
    )


def download_snapshot(repo_id: str, revision: str | None, cache_dir: str | None) -> Path:
    """Fetch what codyra loads of ``repo_id`` at ``revision`` into the cache; the snapshot folder, which
    holds safetensors weights (else :func:`no_safetensors_error`)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    cache = cache_path(cache_dir)
    label = hub_label(repo_id, revision)
    try:
        folder = Path(
            snapshot_download(repo_id, revision=revision, cache_dir=cache, allow_patterns=list(FETCH_PATTERNS))
        )
    except RevisionNotFoundError as err:
        raise WeightsUnavailableError(
            f"{repo_id} has no revision {revision!r} (config key model.revision; null: the main branch)"
        ) from err
    except RepositoryNotFoundError as err:  # and GatedRepoError, its subclass
        raise WeightsUnavailableError(access_error(repo_id, err)) from err
    except (HfHubHTTPError, OSError) as err:  # no connection, the hub down, a full disk
        offline = " (HF_HUB_OFFLINE=1)" if is_offline() else ""
        raise WeightsUnavailableError(
            f"could not fetch {label} into {cache}{offline}: {type(err).__name__}: {err}. Fetch it on a machine "
            f"with internet (e.g. a login node): {fetch_command(repo_id, cache_dir, revision=revision)}, and point "
            f"model.cache_dir at {cache}; where there is no internet, HF_HUB_OFFLINE=1 reads the cache only"
        ) from err
    if weight_files(folder) is None:
        raise no_safetensors_error(repo_id, revision, folder)
    return folder


def require_cached(repo_id: str, revision: str | None, cache_dir: str | None) -> Path:
    """The cached snapshot of a hub model with its safetensors weights, without the network; else an
    error naming the cache and the fetch command."""
    folder = cached_snapshot(repo_id, revision, cache_dir)
    if folder is not None and weight_files(folder) is not None:
        return folder
    cache, command = cache_path(cache_dir), fetch_command(repo_id, cache_dir, revision=revision)
    label = hub_label(repo_id, revision)
    if folder is not None:
        raise WeightsUnavailableError(
            f"the cached snapshot of {label} ({folder}) holds no safetensors weights. If {repo_id} at revision "
            f"{revision or 'main'} holds none, {revision_hint(repo_id)}. Else its fetch did not finish: {command}"
        )
    offline = " and the Hugging Face hub is offline (HF_HUB_OFFLINE=1)" if is_offline() else ""
    raise WeightsUnavailableError(
        f"{label} is not in the weights cache {cache} (config key model.cache_dir){offline}. Fetch it once on a "
        f"machine with internet (e.g. a login node): {command}, and point model.cache_dir at {cache}"
    )


def hub_model(repo_id: str, revision: str | None, cache_dir: str | None) -> Path:
    """The snapshot folder of a hub model with its safetensors weights: from the cache, else fetched
    (unless the hub is offline: then :func:`require_cached`'s error)."""
    if is_offline():
        return require_cached(repo_id, revision, cache_dir)
    folder = cached_snapshot(repo_id, revision, cache_dir)
    if folder is not None and weight_files(folder) is not None:
        return folder  # a cached model is read without the network
    return download_snapshot(repo_id, revision, cache_dir)
