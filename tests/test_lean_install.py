"""The library without the `workflow` extra (Snakemake, MLflow, submitit): every module but the
Snakefile's own helper imports, the commands' help works, and a command that needs the extra
says which one. The packages are made unimportable in a fresh interpreter (None in sys.modules)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_EXTRA = ("snakemake", "mlflow", "submitit")
BLOCK = f"import sys\nfor name in {WORKFLOW_EXTRA!r}:\n    sys.modules[name] = None\n"


def without_workflow_extra(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        check=False,
    )


def test_the_blocking_works():
    result = without_workflow_extra("import mlflow")
    assert result.returncode != 0 and "import of mlflow halted" in result.stderr


@pytest.mark.slow
def test_every_module_but_the_snakefile_helper_imports():
    result = without_workflow_extra(
        """
        import importlib, json, pkgutil
        import codyra
        failed = {}
        for info in pkgutil.walk_packages(codyra.__path__, "codyra."):
            try:
                importlib.import_module(info.name)
            except ImportError as err:
                failed[info.name] = str(err)
        print(json.dumps(failed))
        """
    )
    assert result.returncode == 0, result.stderr
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    # the Snakefile's helper, and the MlflowClient subclass that only the mirror and sync import, lazily
    assert sorted(failed) == ["codyra.experiment.snakemake_compat", "codyra.tracking.artifacts"]


def test_a_method_trains_a_step_and_every_command_has_help():
    result = without_workflow_extra(
        """
        import contextlib, io, torch
        from codyra.cli import build_parser
        from codyra.methods import build_method

        method = build_method({"kind": "codyra", "rank": 2})
        assert method.trains
        parser = build_parser()
        commands = parser._subparsers._group_actions[0].choices
        for name in commands:
            with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
                parser.parse_args([name, "--help"])
            assert "usage: codyra " + name in out.getvalue(), name
        print("ok", len(commands))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "ok"


def test_a_workflow_command_names_the_extra(tmp_path):
    code = "from codyra.cli import main\nraise SystemExit(main(sys.argv[1:]))"
    common = ["--config", "config/config.yaml", "--set", f"results={tmp_path}"]
    sync = without_workflow_extra(code, "sync-mlflow", *common)
    assert sync.returncode == 2
    assert "codyra: error: MLflow tracking (config key tracking.enabled) needs the package 'mlflow'" in sync.stderr
    assert "pip install 'codyra[workflow]'" in sync.stderr
    slurm = without_workflow_extra(
        code, "train", "--method", "codyra", "--seed", "0", "--task", "1", "--slurm", *common
    )
    assert slurm.returncode == 2
    assert "launching with --slurm (submitit) needs the package 'submitit'" in slurm.stderr
    assert "pip install 'codyra[workflow]'" in slurm.stderr
