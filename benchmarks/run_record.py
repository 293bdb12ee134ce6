"""What every benchmark's JSON records beside its figures: the machine, its load, when, and the
libraries whose versions set the numbers; written atomically under ``results/benchmarks/``."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what ``platform`` knows of it."""
    try:
        with open("/proc/cpuinfo") as info:
            names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def write_record(out: Path, figures: dict, load_before: float, libraries: dict[str, str]) -> dict:
    """``figures`` with the run's facts added, written as JSON to ``out``; returns the record."""
    from codyra.store.io import write_json

    record = {
        **figures,
        **libraries,
        "loadavg_1min": [load_before, os.getloadavg()[0]],
        "cpu_count": os.cpu_count(),
        "machine": cpu_model(),
        "host": platform.node(),
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, record)
    return record
