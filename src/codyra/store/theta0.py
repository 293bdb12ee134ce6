"""theta_0's weights files, verified wherever theta_0 is loaded: a sha256 of each file's bytes
against a record (``weights-digest.json``: ``{file: sha256}``), and no non-finite value.

- A mini benchmark's own theta_0: its pretraining records the digests beside the files it
  writes (``results/{benchmark}/pretrain/``); a missing or different record is an error naming
  the job to rerun.
- Any other weights (an open_clip tag, a Hugging Face model, a ``model.pretrained`` path): the
  digests are recorded at their first use in ``results/{benchmark}/pretrain/weights-digest.json``
  and checked at every later use. In the results folder, not beside the weights: every result
  of a benchmark was computed from those bytes, while a weights cache may be read-only on
  compute nodes and shared by other projects; a deliberate change (a new revision) is accepted
  by deleting the record, and the benchmark's results are rerun from the new weights.

The digest covers the file bytes, as ``sha256sum`` does: the files are read as they are
(downloaded files are not ours to canonicalise; the mini's are written with sorted headers).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

from codyra.store.io import ResultError, read_json, write_json
from codyra.store.paths import WEIGHTS_DIGEST, results_path

DIGEST_FILE = Path(WEIGHTS_DIGEST).name
HF_INDEX = "model.safetensors.index.json"
log = logging.getLogger(__name__)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def local_weight_files(path: Path) -> list[Path]:
    """The safetensors files of a weights file or a Hugging Face model folder (its index's shards,
    else ``model.safetensors``)."""
    if path.is_file():
        return [path]
    index = path / HF_INDEX
    if index.is_file():
        return [path / name for name in sorted(set(read_json(index)["weight_map"].values()))]
    return [path / "model.safetensors"]


def record_written(files: list[Path]) -> None:
    """Record the digests of weights files a pretraining has just written, beside them."""
    record = files[0].parent / DIGEST_FILE
    recorded = read_json(record) if record.is_file() else {}
    write_json(record, {**recorded, **{f.name: file_sha256(f) for f in files}})


def write_model_folder(out: Path, *parts) -> None:
    """A mini's theta_0 as the Hugging Face folder ``out``: each of ``parts`` (model, tokenizer, image
    processor) saved into a staging folder beside it with the weights' digests, which then replaces
    ``out`` whole, so a killed pretraining leaves no half-written theta_0."""
    staging = out.parent / f".{out.name}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    for part in parts:
        part.save_pretrained(staging)
    record_written(local_weight_files(staging))  # every load of theta_0 checks it against this digest
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)


def verify_own(files: list[Path], rerun: str) -> None:
    """Check a mini benchmark's own theta_0 against the record its pretraining wrote beside it."""
    record = files[0].parent / DIGEST_FILE
    recorded = read_json(record) if record.is_file() else {}
    for f in files:
        if f.name not in recorded:
            raise ResultError(
                f"theta_0 {f} has no digest in {record} (written by another codyra, or the record was lost): {rerun}"
            )
        digest = file_sha256(f)
        if digest != recorded[f.name]:
            raise ResultError(
                f"theta_0 {f} changed since its pretraining wrote it "
                f"(sha256 {digest}, {record} records {recorded[f.name]}): {rerun}"
            )


def verify_first_use(cfg: dict, files: dict[str, Path], restore: str) -> dict[str, str]:
    """Check weights against the digests recorded at their first use by this benchmark (``files``:
    a stable name of each file, such as its hub repository and file name -> the local file);
    return the digests of those not seen before, for :func:`record_first_use` once they loaded."""
    record = results_path(cfg, WEIGHTS_DIGEST)
    recorded = read_json(record) if record.is_file() else {}
    new = {}
    for name, f in files.items():
        digest = file_sha256(f)
        if name not in recorded:
            new[name] = digest
        elif digest != recorded[name]:
            raise ResultError(
                f"pretrained weights {f} ({name}) changed since this benchmark first used them: sha256 {digest}, "
                f"{record} records {recorded[name]}. If they are corrupt, {restore}. If you replaced them on purpose, "
                f"delete {record} and rerun every result under {record.parent.parent}: "
                "they were computed from the old weights"
            )
    return new


def record_first_use(cfg: dict, digests: dict[str, str]) -> None:
    if digests:
        record = results_path(cfg, WEIGHTS_DIGEST)
        write_json(record, {**(read_json(record) if record.is_file() else {}), **digests})
        log.info("recorded the sha256 of %s in %s", ", ".join(digests), record)


def check_finite(model, source: Path | str, fix: str) -> None:
    """Refuse a theta_0 holding NaN or infinite values in its state dict (a corrupt file)."""
    bad = [name for name, t in model.state_dict().items() if t.is_floating_point() and not bool(t.isfinite().all())]
    if bad:
        raise ResultError(
            f"theta_0 {source} holds non-finite values in {len(bad)} tensor(s) (e.g. {bad[0]}): "
            f"the weights are corrupt; {fix}"
        )
