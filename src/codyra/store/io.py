"""Atomic file writes: a reader (or a killed job's successor) sees the old file or the new one.

Files are created with mode 0666 minus the process umask, like any ``open()``: on a shared
cluster project folder the group sees the results (``tempfile.mkstemp`` would make them 0600).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from pathlib import Path

from codyra.errors import NotWritableError


class ResultError(ValueError):
    """A result file is unreadable, corrupt, absurd or stale; the message names it and the job to rerun."""


def atomic_write(path: str | Path, write) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)  # the umask applies
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    os.close(fd)
    try:
        write(str(tmp))
        os.chmod(tmp, mode)  # some writers (safetensors) replace the file by a 0600 one of their own
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def require_writable(directory: str | Path) -> None:
    """Fail before any work if ``directory`` (created if absent) cannot take a new file: a job
    on a read-only or full results folder stops at once with one line, not after hours of work."""
    directory = Path(directory)
    probe = directory / f".write-probe.{secrets.token_hex(4)}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        try:
            os.write(fd, b"\0")  # a full disk refuses the first block, not the file's creation
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
    except OSError as err:
        raise NotWritableError(
            f"cannot write results to {directory}: {err.strerror or err}. Free space there or make it writable "
            "(or point config key results elsewhere), then rerun"
        ) from err


def write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: str | Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def fingerprint(obj) -> str:
    """Short stable hash of a JSON-able value (Snakemake params use it to rerun changed jobs)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_json(path: str | Path):
    """The JSON in ``path``; a file that does not parse is a ResultError naming it."""
    try:
        return json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultError(
            f"{path} is not valid JSON ({err}); delete it and rerun the job that writes it (snakemake -f {path})"
        ) from None


def save_safetensors(path: str | Path, tensors: dict, metadata: dict | None = None) -> None:
    """``safetensors.torch.save_file``, atomically, with the header's keys sorted.

    safetensors writes the metadata in hash-map order, which differs between processes; sorted,
    identical tensors give identical bytes, so a sha256 of two runs' files compares them.
    """
    from safetensors.torch import save_file

    def write(tmp: str) -> None:
        save_file(tensors, tmp, metadata=metadata)
        with open(tmp, "r+b") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
            # same content and separators as serde_json's: the same length, so the data offsets hold
            canonical = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            if len(canonical) > size:
                raise ValueError(f"safetensors header of {tmp} grew when sorted ({len(canonical)} > {size} bytes)")
            f.seek(8)
            f.write(canonical.ljust(size))

    atomic_write(path, write)
