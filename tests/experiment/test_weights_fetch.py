"""`codyra fetch-weights` for every backbone and the weights check at DAG build, against a fake
Hugging Face hub (huggingface_hub's download function monkeypatched; no test touches the network)."""

from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
from huggingface_hub import constants as hub_constants
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import filter_repo_objects

from codyra import hub
from codyra.cli import main
from codyra.errors import WeightsUnavailableError
from codyra.experiment.config import load_config, overlay
from codyra.experiment.weights import require_weights
from codyra.llm.model import check_loads
from codyra.rehearsal.models import publish
from tests.rehearsal.test_standins import paper_raw, standin_world  # noqa: F401 (a fixture)

REAL_SNAPSHOT = huggingface_hub.snapshot_download
BLIP = "Salesforce/blip-itm-base-coco"
NOT_LOADED = {  # what repositories hold beside the files codyra reads
    "pytorch_model.bin": b"a pickle",
    "tf_model.h5": b"tensorflow",
    "flax_model.msgpack": b"flax",
    "README.md": b"# card",
    ".gitattributes": b"*.bin filter=lfs",
    "original/consolidated.00.pth": b"a pickle",
    "original/params.json": b"{}",
    "gemma-2b-it.gguf": b"gguf",
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access is blocked in tests")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def snapshot_of(cache: Path, repo_id: str, revision: str = "main") -> Path:
    return Path(REAL_SNAPSHOT(repo_id, revision=revision, cache_dir=str(cache), local_files_only=True))


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """A hub online: ``served[repo][revision]`` is the folder it holds (plus :data:`NOT_LOADED`); a
    download lays out the files its patterns select in the cache, as snapshot_download does."""
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    served: dict[str, dict[str, Path]] = {}
    calls = []

    def snapshot_download(repo_id, *, revision=None, cache_dir=None, allow_patterns=None, local_files_only=False):
        if local_files_only:
            return REAL_SNAPSHOT(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=True)
        calls.append((repo_id, revision, allow_patterns))
        response = httpx2.Response(404, request=httpx2.Request("GET", f"https://huggingface.co/api/models/{repo_id}"))
        if repo_id not in served:
            raise RepositoryNotFoundError(f"404 {repo_id}", response=response)
        folder = served[repo_id].get(revision or "main")
        if folder is None:
            raise RevisionNotFoundError(f"404 {revision}", response=response)
        listing = [f.name for f in folder.iterdir()] + list(NOT_LOADED)
        staging = tmp_path / "download"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for name in filter_repo_objects(listing, allow_patterns=allow_patterns):
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((folder / name).read_bytes() if (folder / name).is_file() else NOT_LOADED[name])
        publish(Path(cache_dir), repo_id, {revision or "main": staging})
        return str(snapshot_of(Path(cache_dir), repo_id, revision or "main"))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return served, calls


def serve(served, world, name: str) -> str:
    """Serve a stand-in's repository (every revision it has) from the fake hub; its id."""
    raw, standin = world[name]
    cache = Path(standin.overrides["model"]["cache_dir"])
    repo_id = load_config(dict(raw))["model"]["name"]
    refs = cache / next(cache.glob("models--*")).name / "refs"
    served[repo_id] = {
        str(ref.relative_to(refs)): snapshot_of(cache, repo_id, str(ref.relative_to(refs)))
        for ref in refs.rglob("*")
        if ref.is_file()
    }
    return repo_id


@pytest.mark.parametrize(
    "listing, fetched",
    [
        (  # meta-llama/Llama-2-7b-chat-hf: safetensors shards beside pickled ones
            [
                "config.json",
                "generation_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "pytorch_model-00001-of-00002.bin",
                "pytorch_model-00002-of-00002.bin",
                "pytorch_model.bin.index.json",
                "special_tokens_map.json",
                "tokenizer.json",
                "tokenizer.model",
                "tokenizer_config.json",
                "LICENSE.txt",
                "README.md",
                "Responsible-Use-Guide.pdf",
                "USE_POLICY.md",
            ],
            {
                "config.json",
                "generation_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "special_tokens_map.json",
                "tokenizer.json",
                "tokenizer.model",
                "tokenizer_config.json",
            },
        ),
        (  # meta-llama/Llama-3.2-1B-Instruct: Meta's original checkpoint under original/
            [
                "config.json",
                "generation_config.json",
                "model.safetensors",
                "original/consolidated.00.pth",
                "original/params.json",
                "original/tokenizer.model",
                "special_tokens_map.json",
                "tokenizer.json",
                "tokenizer_config.json",
            ],
            {
                "config.json",
                "generation_config.json",
                "model.safetensors",
                "special_tokens_map.json",
                "tokenizer.json",
                "tokenizer_config.json",
            },
        ),
        (  # google/gemma-2b-it: a GGUF file of the whole model beside the shards
            ["config.json", "gemma-2b-it.gguf", "model-00001-of-00002.safetensors", "model.safetensors.index.json"],
            {"config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json"},
        ),
        (  # Salesforce/blip-itm-base-coco at refs/pr/5: its conversion beside PyTorch, TF and Flax files
            [
                "config.json",
                "flax_model.msgpack",
                "model.safetensors",
                "preprocessor_config.json",
                "pytorch_model.bin",
                "special_tokens_map.json",
                "tf_model.h5",
                "tokenizer.json",
                "tokenizer_config.json",
                "vocab.txt",
            ],
            {
                "config.json",
                "model.safetensors",
                "preprocessor_config.json",
                "special_tokens_map.json",
                "tokenizer.json",
                "tokenizer_config.json",
                "vocab.txt",
            },
        ),
    ],
)
def test_a_fetch_selects_only_what_the_loaders_read(listing, fetched):
    assert set(filter_repo_objects(listing, allow_patterns=list(hub.FETCH_PATTERNS))) == fetched


def test_fetch_weights_of_a_hub_model_at_a_revision(fake_hub, standin_world, tmp_path, capsys):  # noqa: F811
    served, calls = fake_hub
    repo_id = serve(served, standin_world, "blip")
    cache = tmp_path / "cache"
    assert main(["fetch-weights", "--model", repo_id, "--revision", "refs/pr/5", "--cache-dir", str(cache)]) == 0
    assert calls == [(repo_id, "refs/pr/5", list(hub.FETCH_PATTERNS))]
    snapshot = snapshot_of(cache, repo_id, "refs/pr/5")
    assert {f.name for f in snapshot.iterdir()} == {f.name for f in served[repo_id]["refs/pr/5"].iterdir()}
    assert not any(f.suffix in {".bin", ".h5", ".msgpack", ".pth", ".gguf"} for f in cache.rglob("*"))
    out = capsys.readouterr().out
    assert f"{repo_id}@refs/pr/5: {snapshot}" in out and f"model.cache_dir: {cache}" in out

    # main holds no safetensors weights, as on the hub: refused, naming the revision to set
    assert main(["fetch-weights", "--model", repo_id, "--cache-dir", str(tmp_path / "main")]) == 2
    err = capsys.readouterr().err
    assert f"{repo_id} at revision main holds no safetensors weights" in err
    assert "set config key model.revision" in err and "refs/pr/<N>" in err and "model.pretrained" in err


LLAMA_PAGE = "https://huggingface.co/meta-llama/Llama-2-7b-chat-hf"


@pytest.mark.parametrize(
    "token, message",
    [
        (None, f"no Hugging Face token is set.*accepted its licence on {LLAMA_PAGE}.*HF_TOKEN.*hf auth login"),
        (
            "hf_abc",
            f"gated model and the Hugging Face token in use has no access to it: accept its licence on {LLAMA_PAGE}",
        ),
    ],
)
def test_a_gated_model_says_how_to_get_access(monkeypatch, tmp_path, capsys, token, message):
    def gated(repo_id, **kwargs):
        response = httpx2.Response(403, request=httpx2.Request("GET", f"https://huggingface.co/api/models/{repo_id}"))
        raise GatedRepoError(f"403 Client Error: access to model {repo_id} is restricted", response=response)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", gated)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: token)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    args = ["fetch-weights", "--model", "meta-llama/Llama-2-7b-chat-hf", "--cache-dir", str(tmp_path)]
    assert main(args) == 2
    assert re.search(message, capsys.readouterr().err)


def test_an_unknown_revision_names_the_key(fake_hub, standin_world, tmp_path):  # noqa: F811
    served, _ = fake_hub
    repo_id = serve(served, standin_world, "blip")
    with pytest.raises(WeightsUnavailableError, match=r"has no revision 'refs/pr/9' \(config key model.revision"):
        hub.download_snapshot(repo_id, "refs/pr/9", str(tmp_path))


def test_fetch_weights_of_a_config_fetches_every_backbone(fake_hub, standin_world, tmp_path, capsys, monkeypatch):  # noqa: F811
    served, calls = fake_hub
    repos = [serve(served, standin_world, n) for n in ("llama-2-7b-chat", "gemma-2b-it", "llama-3.2-1b-instruct")]
    cache = tmp_path / "cache"
    trace = ["--config", "config/trace.yaml", "--cache-dir", str(cache)]
    assert main(["fetch-weights", *trace, "--set", "backbone=gemma-2b-it"]) == 0
    assert [c[0] for c in calls] == ["google/gemma-2b-it"]
    assert main(["fetch-weights", *trace, "--all-backbones"]) == 0
    assert [c[0] for c in calls[1:]] == repos  # in trace.yaml's order
    out = capsys.readouterr().out
    assert f"trace-llama-3.2-1b-instruct: meta-llama/Llama-3.2-1B-Instruct: {snapshot_of(cache, repos[2])}" in out

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)  # a compute node now reads them offline
    for name in ("llama-2-7b-chat", "gemma-2b-it", "llama-3.2-1b-instruct"):
        require_weights(load_config(overlay(paper_raw(name, tmp_path), {"model": {"cache_dir": str(cache)}})))

    assert main(["fetch-weights", "--config", "config/config.yaml"]) == 0
    assert "nothing to fetch" in capsys.readouterr().out
    assert main(["fetch-weights", "--config", "config/mtil_5shot.yaml", "--all-backbones"]) == 2
    assert "--all-backbones: config/mtil_5shot.yaml has no backbones" in capsys.readouterr().err


def test_a_download_whose_weights_miss_a_parameter_does_not_load(standin_world, tmp_path):  # noqa: F811
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "model"
    standin_cache = Path(standin_world["gemma-2b-it"][1].overrides["model"]["cache_dir"])
    shutil.copytree(snapshot_of(standin_cache, "google/gemma-2b-it"), folder)
    check_loads(folder)
    weights = folder / "model.safetensors"
    state = load_file(weights)
    state.pop("model.layers.1.mlp.down_proj.weight")
    weights.unlink()  # a link into the blobs
    save_file(state, weights, metadata={"format": "pt"})
    missing = r"do not fit GemmaForCausalLM: 1 parameter\(s\) missing \(e.g. model.layers.1.mlp.down_proj"
    with pytest.raises(ValueError, match=missing):
        check_loads(folder)


@pytest.mark.parametrize(
    "name, command",
    [
        ("clip", "codyra fetch-weights --model ViT-B-16 --pretrained openai --cache-dir {cache}"),
        ("gemma-2b-it", "codyra fetch-weights --model google/gemma-2b-it --cache-dir {cache}"),
        ("blip", f"codyra fetch-weights --model {BLIP} --revision refs/pr/5 --cache-dir {{cache}}"),
    ],
)
def test_a_missing_backbone_is_refused_with_the_exact_fetch_command(tmp_path, name, command):
    cache = tmp_path / "empty-cache"
    cfg = load_config(overlay(paper_raw(name, tmp_path), {"model": {"cache_dir": str(cache)}}))
    with pytest.raises(WeightsUnavailableError, match=f"not in the weights cache {cache}") as error:
        require_weights(cfg)  # with the network blocked: a cache lookup only
    assert command.format(cache=cache) in str(error.value)


def test_missing_local_weights_are_refused(tmp_path):
    folder = tmp_path / "converted"
    cfg = load_config(overlay(paper_raw("blip", tmp_path), {"model": {"pretrained": str(folder)}}))
    with pytest.raises(FileNotFoundError, match=f"config key model.pretrained: theta_0 {folder} does not exist"):
        require_weights(cfg)
    folder.mkdir()
    (folder / "pytorch_model.bin").write_bytes(b"a pickle")
    with pytest.raises(FileNotFoundError, match="holds no safetensors weights.*never loads pickled weights"):
        require_weights(cfg)


def test_jobs_run_offline_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)  # imported before: it read the variable
    hub.offline_by_default()
    assert hub.is_offline() and os.environ["HF_HUB_OFFLINE"] == "1"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a cluster whose nodes have internet
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    hub.offline_by_default()
    assert not hub.is_offline() and os.environ["HF_HUB_OFFLINE"] == "0"


@pytest.mark.slow
def test_the_dag_build_refuses_a_backbone_missing_from_the_weights_cache(tmp_path):
    from codyra.mini.trace.tasks import write_mini_trace
    from tests.workflow.conftest import snakemake

    root = tmp_path / "TRACE"
    write_mini_trace(root, 0, {"train": 2, "eval": 2, "test": 2})  # the data is there; the weights are not
    cache = tmp_path / "cache"
    cfg = {
        "benchmark": "weights-check",
        "results": str(tmp_path / "results"),
        "seeds": [0],
        "methods": ["zeroshot"],
        "model": {"family": "causal_lm", "name": "google/gemma-2b-it", "cache_dir": str(cache)},
        "data": {"kind": "trace", "root": str(root)},
        "tasks": ["C-STANCE"],
        "method_configs": {"zeroshot": {"kind": "zeroshot"}},
        "tracking": {"enabled": False},
    }
    refused = snakemake(tmp_path, cfg, "-n", "all_tables", check=False)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Job stats" not in refused.stdout  # no job was planned
    assert f"codyra fetch-weights --model google/gemma-2b-it --cache-dir {cache}" in output
    assert "--config check_data=False" in output
    planned = snakemake(tmp_path, cfg, "-n", "all_tables", "--config", "check_data=False")
    assert "eval_row0" in planned.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "backbone=gemma-2b-it"], "give the config with --config"),
        (["--model", "google/gemma-2b-it", "--pretrained", "openai"], "a Hugging Face model takes --revision"),
        (["--model", "ViT-B-16", "--revision", "refs/pr/5"], "an open_clip model takes --pretrained TAG"),
        (["--config", "config/trace.yaml", "--revision", "main"], "with --config the config's model block does"),
    ],
)
def test_contradicting_options_are_refused_before_any_download(argv, message, capsys):
    assert main(["fetch-weights", *argv]) == 2
    assert message in capsys.readouterr().err
