"""`make run` / `make test` set up .venv themselves: created when missing, reinstalled when
pyproject.toml or constraints.txt changed, created anew when it is another checkout's, left alone
otherwise (pip and venv stand-ins log their calls). A workflow run in an environment that is
another checkout's says so."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

# Stand-ins for `python3 -m venv [--clear] DIR` and pip, logging their arguments. The venv's python
# answers the Makefile's question (`import codyra; print(codyra.__file__)`) with the source folder
# the editable install recorded; `pip install -e .` records the checkout's src/ and writes the
# launchers with the venv's python on their first line, as pip does. A copied tree keeps both.
FAKE_VENV = """#!/bin/sh
echo "venv $*" >> {log}
for venv; do :; done
case "$*" in *--clear*) rm -rf "$venv"/* "$venv"/.[!.]*;; esac  # through a link, as venv clears
mkdir -p "$venv/bin"
printf '#!/bin/sh\ncat "$(dirname "$0")/../editable-source"\n' > "$venv/bin/python"
chmod +x "$venv/bin/python"
"""
FAKE_PIP = """#!/bin/sh
echo "pip $*" >> {log}
case "$*" in *"-e "*)
    echo "$PWD/src/codyra/__init__.py" > .venv/editable-source
    for launcher in snakemake pytest; do printf '#!%s\n' "$PWD/.venv/bin/python" > .venv/bin/$launcher; done;;
esac
"""
INSTALL = ["pip install -q torch==2.14.1 torchvision==0.29.1", "pip install -q -e .[dev,docs] -c constraints.txt"]


def new_checkout(folder: Path) -> Path:
    """``folder`` with the repository's Makefile, pyproject.toml and constraints.txt, and the stand-ins."""
    folder.mkdir()
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, folder / name)
    for name, script in (("fake-python", FAKE_VENV), ("fake-pip", FAKE_PIP)):
        (folder / name).write_text(script.format(log=folder / "calls.log"))
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture
def checkout(tmp_path):
    return new_checkout(tmp_path / "checkout")


def make_env_output(folder: Path) -> tuple[list[str], str]:
    """`make env` in ``folder``: the calls it made and what it printed."""
    log = folder / "calls.log"
    log.unlink(missing_ok=True)
    result = subprocess.run(
        ["make", "-s", "env", f"PYTHON={folder / 'fake-python'}", f"PIP={folder / 'fake-pip'}"],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    )
    return (log.read_text().splitlines() if log.exists() else []), result.stdout


def make_env(folder: Path) -> list[str]:
    """`make env` in ``folder``; the calls it made."""
    return make_env_output(folder)[0]


def test_first_call_creates_and_installs_then_nothing_until_the_pins_change(checkout):
    assert make_env(checkout) == ["venv -m venv .venv", *INSTALL]
    assert make_env(checkout) == []  # the same command again: nothing reinstalled
    (checkout / "pyproject.toml").touch()
    assert make_env(checkout) == []  # a newer file with the same content (a git checkout): nothing either
    with open(checkout / "constraints.txt", "a") as f:
        f.write("tabulate==0.10.0\n")
    assert make_env(checkout) == INSTALL  # changed pins: reinstalled into the existing .venv
    assert make_env(checkout) == []


def test_a_copied_checkouts_environment_is_created_anew_and_the_originals_left_alone(checkout):
    make_env(checkout)
    copy = checkout.parent / "copy"
    shutil.copytree(checkout, copy, symlinks=True)
    (copy / "fake-python").write_text(FAKE_VENV.format(log=copy / "calls.log"))
    (copy / "fake-pip").write_text(FAKE_PIP.format(log=copy / "calls.log"))
    calls, output = make_env_output(copy)
    assert calls == ["venv -m venv --clear .venv", *INSTALL]  # the stamp matches, but the code is the original's
    assert "up to date" not in output
    assert f"its codyra is {checkout}/src/codyra/__init__.py" in output
    assert f"bin/snakemake starts {checkout}/.venv/bin/python" in output
    assert make_env_output(copy)[1] == ".venv: up to date with pyproject.toml and constraints.txt\n"
    assert make_env(checkout) == []


def test_a_link_to_another_checkouts_environment_is_replaced_and_its_target_left_alone(checkout):
    make_env(checkout)
    other = new_checkout(checkout.parent / "other")  # e.g. a second clone sharing the first one's .venv
    (other / ".venv").symlink_to(checkout / ".venv")
    calls, output = make_env_output(other)
    assert calls == ["venv -m venv .venv", *INSTALL]  # not `--clear`, which would empty the target
    assert f"the link to {checkout / '.venv'} is replaced" in output
    assert not (other / ".venv").is_symlink()
    assert make_env(checkout) == []  # the original environment is intact and current
    assert make_env(other) == []


def test_a_link_to_an_environment_that_is_gone_is_replaced(checkout):
    (checkout / ".venv").symlink_to(checkout.parent / "deleted-venv")
    calls, output = make_env_output(checkout)
    assert calls == ["venv -m venv .venv", *INSTALL]  # venv itself fails on a dangling link ("File exists")
    assert f"the link to {checkout.parent / 'deleted-venv'} is replaced" in output
    assert not (checkout / ".venv").is_symlink() and not (checkout.parent / "deleted-venv").exists()


@pytest.mark.parametrize("stale", ["editable-source", "bin/pytest"])
def test_one_part_left_from_another_checkout_is_enough_to_create_it_anew(checkout, stale):
    make_env(checkout)
    path = checkout / ".venv" / stale
    path.write_text(path.read_text().replace(str(checkout), "/elsewhere"))  # e.g. a launcher pip did not rewrite
    assert make_env(checkout) == ["venv -m venv --clear .venv", *INSTALL]


def test_a_workflow_that_imports_another_checkouts_codyra_says_so(tmp_path):
    from codyra.experiment.snakemake_compat import foreign_code

    assert foreign_code(ROOT / "workflow") is None  # this checkout's environment
    (tmp_path / "workflow").mkdir()
    assert foreign_code(tmp_path / "workflow") is None  # a workflow without a source tree of its own
    own = tmp_path.resolve() / "src" / "codyra"
    own.mkdir(parents=True)
    message = foreign_code(tmp_path / "workflow")
    assert f"runs codyra from {ROOT / 'src' / 'codyra'}, not from its own {own}" in message
    assert "`make env` in this checkout" in message


def test_a_failed_install_is_retried(checkout):
    (checkout / "fake-pip").write_text("#!/bin/sh\nexit 1\n")
    with pytest.raises(subprocess.CalledProcessError):
        make_env(checkout)
    assert not (checkout / ".venv" / ".codyra-env").exists()
    (checkout / "fake-pip").write_text(FAKE_PIP.format(log=checkout / "calls.log"))
    assert make_env(checkout) == INSTALL  # the venv is kept, the install runs again


def test_ci_runs_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## The two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["make run", "make test", "make test-all"]
    assert "make test-all" in (ROOT / ".ci" / "run").read_text().splitlines()
    targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert {"run", "test", "test-all", "env"} <= set(targets)


def test_make_test_runs_the_fast_tier_and_test_all_every_test():
    def pytest_line(target: str) -> str:
        dry_run = ["make", "-n", "--no-print-directory", target, "PYTEST_ARGS=tests/experiment/test_config.py"]
        lines = subprocess.run(dry_run, cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
        return next(line for line in reversed(lines) if "pytest" in line)

    assert pytest_line("test").endswith('pytest -m "not slow" tests/experiment/test_config.py')
    assert pytest_line("test-all").endswith("pytest tests/experiment/test_config.py")
