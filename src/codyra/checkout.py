"""The git commit codyra runs from: named in ``codyra --version`` and on every MLflow run."""

from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def git_commit(package_dir: Path = PACKAGE_DIR) -> str | None:
    """The commit of the git checkout ``package_dir`` (``<checkout>/src/codyra``) is in, with
    ``+changes`` if tracked files differ from it; None for an installed copy or without git."""

    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", *argv], cwd=package_dir, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()

    try:
        top = git("rev-parse", "--show-toplevel")
        if not top or Path(top).resolve() / "src" / "codyra" != package_dir.resolve():
            return None  # not a checkout of codyra (e.g. an installed copy inside another repository)
        commit = git("rev-parse", "--short=12", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):  # no git
        return None
    return (commit + ("+changes" if changed else "")) or None
