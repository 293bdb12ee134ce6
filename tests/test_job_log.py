"""A job's logging inside the Snakemake process: what a job's libraries log goes to the job's log,
and Snakemake's own lines print once after it (not again through a root handler a library installed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A fresh process (pytest's own root handlers would hide the effect): a scheduler logger that
# prints through its own handler and propagates, as Snakemake's does; a job thread that builds
# an open_clip model (open_clip logs through the module-level logging functions) under job_log;
# then the scheduler's line after the job. argv: the job's log file.
SCRIPT = """
import logging, sys, threading
from codyra.clip.model import build_clip
from codyra.progress import job_log

scheduler = logging.getLogger("snakemake.logging")
scheduler.setLevel(logging.INFO)
scheduler.addHandler(logging.StreamHandler(sys.stderr))

def job():
    with job_log(sys.argv[1]):
        build_clip("codyra-mini", None, {})  # no weights: open_clip warns on the root logger

thread = threading.Thread(target=job)
thread.start()
thread.join()
scheduler.info("Finished jobid: 1")
"""


@pytest.mark.slow
def test_a_jobs_library_logs_go_to_its_log_and_the_schedulers_lines_print_once(tmp_path):
    log = tmp_path / "job.log"
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True, check=True)
    assert result.stderr.splitlines() == ["Finished jobid: 1"]
    assert "WARNING root: No pretrained weights loaded for model 'codyra-mini'" in log.read_text()
