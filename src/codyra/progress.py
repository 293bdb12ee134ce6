"""Per-job logs and progress bars that work when jobs run as threads of one process.

Snakemake runs the embedded default's jobs as threads of its own process (see
profiles/default), so a job cannot redirect sys.stderr. Instead ``job_log`` routes this
thread's log records and progress bars into the job's log file, and writes the traceback
there if the job fails, so the log's last lines say why.

The job's handler sits on the root logger too. open_clip logs through the module-level
``logging.info``, which, on a root logger without handlers, first calls ``logging.basicConfig``:
a stderr handler on the root logger of the whole Snakemake process, to which Snakemake's own
records propagate, so each of them would print twice (``INFO:snakemake.logging:...``) for the
rest of the run. With the job's handler there, that call configures nothing, and what the job's
libraries log (warnings and above on the root logger's default level) goes to the job's log.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import traceback
from pathlib import Path

from tqdm.auto import tqdm

_local = threading.local()
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def job_stream():
    return getattr(_local, "stream", None) or sys.stderr


class LineProgress:
    """tqdm's interface for log files: one line per 10% with rate and ETA, no carriage returns."""

    def __init__(self, total: int, desc: str, stream):
        self.total, self.desc, self.stream = total, desc, stream
        self.n, self.postfix, self.started, self.next_report = 0, "", time.monotonic(), max(1, total // 10)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.n >= self.next_report or self.n >= self.total:
            self._report()
            while self.next_report <= self.n:
                self.next_report += max(1, self.total // 10)

    def set_postfix(self, refresh: bool = False, **values) -> None:
        self.postfix = " ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        if self.n < self.total:
            self._report()

    def _report(self) -> None:
        elapsed = time.monotonic() - self.started
        rate = self.n / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.n) / rate if rate > 0 else float("nan")
        self.stream.write(
            f"{self.desc}: {self.n}/{self.total} ({100 * self.n / max(1, self.total):.0f}%) "
            f"{elapsed:.1f}s elapsed, {rate:.2f}/s, eta {eta:.0f}s {self.postfix}\n"
        )


def progress_bar(total: int, desc: str):
    """A tqdm bar on a terminal; periodic plain lines in a job's log file."""
    stream = job_stream()
    if getattr(stream, "isatty", lambda: False)():
        return tqdm(total=total, desc=desc, file=stream, dynamic_ncols=True)
    return LineProgress(total, desc, stream)


class _ThisThread(logging.Filter):
    def __init__(self):
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record):
        return record.thread == self.thread


@contextlib.contextmanager
def job_log(path: str | Path | None):
    """Send this thread's ``codyra`` logs, what libraries log on the root logger, progress and any
    traceback to ``path`` (None: stderr)."""
    logger = logging.getLogger("codyra")
    logger.setLevel(logging.INFO)
    logger.propagate = False  # the job's own handler below is the only destination
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    stream = open(path, "a", buffering=1) if path else sys.stderr  # noqa: SIM115 - closed below
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(_ThisThread())
    logger.addHandler(handler)
    logging.root.addHandler(handler)
    previous, _local.stream = getattr(_local, "stream", None), stream
    try:
        yield stream
    except BaseException:
        if path:  # on a terminal the caller reports the error itself
            stream.write(traceback.format_exc())
        raise
    finally:
        _local.stream = previous
        logger.removeHandler(handler)
        logging.root.removeHandler(handler)
        if path:
            stream.close()
