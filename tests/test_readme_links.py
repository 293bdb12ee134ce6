"""Every relative link of the README points at a file that is in the repository."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def tracked_files() -> set[str]:
    done = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stdout.splitlines())


def test_relative_links_of_the_readme_resolve_to_tracked_files():
    targets = {t for t in LINK.findall((ROOT / "README.md").read_text()) if "://" not in t}
    assert targets, "the README links no file: the link pattern no longer matches"
    tracked = tracked_files()
    tracked_dirs = {str(Path(f).parent) for f in tracked} | {str(p) for f in tracked for p in Path(f).parents}
    missing = sorted(t for t in targets if t.rstrip("/") not in tracked and t.rstrip("/") not in tracked_dirs)
    assert not missing, f"README links files that a clone does not have (untracked or ignored): {missing}"
