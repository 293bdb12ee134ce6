"""benchmarks/run_record.py: the facts every benchmark records beside its figures."""

from __future__ import annotations

import pytest

from .conftest import load_benchmark


def fake_scontrol(folder, printout: str, status: int):
    """A ``scontrol`` whose ``ping`` prints ``printout`` and exits with ``status``."""
    folder.mkdir()
    script = folder / "scontrol"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = ping ] || exit 2\necho '{printout}'\nexit {status}\n")
    script.chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("printout", "status", "answers"),
    [
        ("Slurmctld(primary) at localhost is UP", 0, True),
        ("Slurmctld(primary) at localhost is DOWN", 1, False),
    ],
)
def test_the_slurm_client_is_recorded_with_whether_its_controller_answers(
    tmp_path, monkeypatch, printout, status, answers
):
    record = load_benchmark("run_record")
    monkeypatch.setenv("PATH", str(fake_scontrol(tmp_path / "bin", printout, status)))

    assert record.slurm_client() == {"slurm_client_installed": True, "slurm_controller_answers": answers}


def test_no_slurm_client_is_recorded_as_such(tmp_path, monkeypatch):
    record = load_benchmark("run_record")
    monkeypatch.setenv("PATH", str(tmp_path))

    assert record.slurm_client() == {"slurm_client_installed": False, "slurm_controller_answers": None}
