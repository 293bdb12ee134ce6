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

Hashing costs a read of every byte (13.5 GB for LLaMA-2-7B) per load, per rank and per evaluation job,
so each file's sha256 is remembered with its stat (size, mtime_ns, ctime_ns, inode, device) in
``weights-stat.json`` beside the record, and a file is read again only when its stat differs: a file
rewritten, replaced, touched or restored to its old mtime changes one of them. A file modified less
than :data:`SETTLED_NS` before it was hashed is not remembered (git's "racy clean" rule): a second
write within the filesystem's timestamp granularity could leave its stat unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from pathlib import Path

from codyra.store.io import ResultError, read_json, write_json
from codyra.store.paths import WEIGHTS_DIGEST, results_path

DIGEST_FILE = Path(WEIGHTS_DIGEST).name
STAT_FILE = "weights-stat.json"  # beside the digest record: {name: {"stat": [...], "sha256": ...}}
SETTLED_NS = 2_000_000_000  # coarser than any filesystem's mtime granularity (FAT's 2 s)
log = logging.getLogger(__name__)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_stat(path: Path) -> list[int]:
    """What changes when a file's bytes may have: size, mtime, ctime (set by any write or utime), inode
    and device. Follows links: a hub cache's snapshot file links to its blob."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def current_digests(files: dict[str, Path], folder: Path) -> dict[str, str]:
    """The sha256 of each of ``files`` (record name -> file), read from disk only where the file's stat
    differs from the one remembered in ``folder/weights-stat.json`` when it was last hashed."""
    memo_file = folder / STAT_FILE
    memo = read_json(memo_file) if memo_file.is_file() else {}
    digests, changed = {}, False
    for name, f in files.items():
        stat, now = file_stat(f), time.time_ns()
        seen = memo.get(name)
        if seen is not None and seen["stat"] == stat:
            digests[name] = seen["sha256"]
            continue
        digests[name] = file_sha256(f)
        if now - stat[1] > SETTLED_NS:
            memo[name] = {"stat": stat, "sha256": digests[name]}
        else:
            memo.pop(name, None)
        changed = True
    if changed:
        write_json(memo_file, memo)
    return digests


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
    record_written(sorted(staging.glob("*.safetensors")))  # every load of theta_0 checks it against this digest
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
    digests = current_digests({f.name: f for f in files}, record.parent)
    for f in files:
        digest = digests[f.name]
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
    for name, digest in current_digests(files, record.parent).items():
        f = files[name]
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
