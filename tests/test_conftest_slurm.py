"""The suite's view of the local SLURM controller: where it is known down, Snakemake's starts in
the tests do not wait for it (tests/conftest.py)."""

from __future__ import annotations

import pytest

from .conftest import local_controller_down


def processes(proc, *names):
    for pid, name in enumerate(names, start=100):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(f"{name}\n")
    return proc


@pytest.mark.parametrize(
    ("controller", "running", "down"),
    [
        ("localhost", ("bash", "python"), True),
        ("127.0.0.1", ("bash",), True),
        ("localhost", ("bash", "slurmctld"), False),  # the local cluster is up
        ("head-node", ("bash",), False),  # another machine's controller: not known from here
    ],
)
def test_the_local_controller_is_down_where_it_is_named_and_not_running(tmp_path, controller, running, down):
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=local\nSlurmctldHost={controller}\nNodeName=localhost CPUs=2\n")

    assert local_controller_down(conf, processes(tmp_path / "proc", *running)) is down


def test_no_config_is_no_local_controller(tmp_path):
    assert local_controller_down(tmp_path / "absent.conf", processes(tmp_path / "proc", "bash")) is False
