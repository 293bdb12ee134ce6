"""Every relative link of the README points at a file that is in the repository, and every pointer of a
config comment or a docstring to a page or a section of one names one that exists."""

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


# A pointer from a config comment or a docstring to a page: `docs/x.md`, or a section of one,
# `docs/x.md, "Heading"` or `README "Heading"` (the README's sections move to docs/ as they grow).
PAGE = re.compile(r"\bdocs/[\w./-]*?\.md\b")
SECTION = re.compile(r"""\b(README|docs/[\w./-]*?\.md)(?:'s)?,? "([^"]+)\"""")


def headings(page: Path) -> set[str]:
    """The headings of a Markdown page (not the `#` lines of its code blocks)."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#+ ", line):
            found.add(line.lstrip("#").strip())
    return found


def pointer_texts() -> dict[str, str]:
    """Every config, source, workflow, script and test file, its lines joined (a pointer may wrap)."""
    files = [*(ROOT / "config").rglob("*.yaml"), *(ROOT / "src" / "codyra").rglob("*.py")]
    files += (ROOT / "src" / "codyra").rglob("*.yaml")
    files += [*(ROOT / "workflow").rglob("*.smk"), ROOT / "workflow" / "Snakefile", *(ROOT / "scripts").glob("*.py")]
    files += (f for f in (ROOT / "tests").rglob("*.py") if f != Path(__file__))  # this one names examples
    return {str(f.relative_to(ROOT)): re.sub(r"\s*\n\s*#?\s*", " ", f.read_text()) for f in files}


def test_pointers_of_configs_and_docstrings_name_pages_that_exist():
    texts = pointer_texts()
    named = {(path, page) for path, text in texts.items() for page in PAGE.findall(text)}
    assert any(page == "docs/analyses.md" for _, page in named), "the page pattern no longer matches"
    missing = sorted(f"{path}: {page}" for path, page in named if not (ROOT / page).is_file())
    assert not missing, f"pointers to pages docs/ does not have: {missing}"


def test_pointers_to_a_section_name_a_heading_of_its_page():
    texts = pointer_texts()
    named = {(path, page, title) for path, text in texts.items() for page, title in SECTION.findall(text)}
    assert named, "no pointer to a section: the section pattern no longer matches"
    wrong = sorted(
        f'{path}: {page}, "{title}"'
        for path, page, title in named
        if title not in headings(ROOT / ("README.md" if page == "README" else page))
    )
    assert not wrong, f"pointers to a section the page has no heading for (it moved?): {wrong}"
