"""The docs site as `mkdocs build --strict` writes it: what a strict build cannot see.

A strict build fails on a missing page or heading in the Markdown, but not on a snippet include
that a formatter turned into text, a link a docstring renders by accident, a module no reference
page names, or signatures without their types; these tests read the built HTML for each.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]


class Page(HTMLParser):
    """One built page: its element ids, its links, its code blocks and its API signatures by entry."""

    def __init__(self, path: Path):
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.code_blocks: list[str] = []
        self.signatures: dict[str, str] = {}
        self._entry = None  # the id of the API entry whose heading came last
        self._pre = None  # the text of the <pre> being read
        self._signature_depth = 0  # > 0 inside a doc-signature <div>
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
            if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                self._entry = attrs["id"]
        if tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.links.append(attrs["src"])
        if tag == "pre":
            self._pre = []
        if tag == "div" and (self._signature_depth or "doc-signature" in (attrs.get("class") or "").split()):
            self._signature_depth += 1

    def handle_endtag(self, tag):
        if tag == "pre" and self._pre is not None:
            text = "".join(self._pre)
            self.code_blocks.append(text)
            if self._signature_depth:
                self.signatures[self._entry] = " ".join(text.split())
            self._pre = None
        if tag == "div" and self._signature_depth:
            self._signature_depth -= 1

    def handle_data(self, data):
        if self._pre is not None:
            self._pre.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra builds it: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        check=False,  # its log goes into the assertion's message
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def pages(site) -> dict[Path, Page]:
    return {path: Page(path) for path in sorted(site.rglob("*.html"))}


def broken_links(site: Path, pages: dict[Path, Page]) -> list[str]:
    """Every link of the site to a file it lacks, or to an anchor its target page lacks."""
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                continue
            target = unquote(parts.path)
            if not target:
                resolved = path
            elif target.startswith("/"):  # 404.html links from the site's root
                resolved = (site / target.lstrip("/")).resolve()
            else:
                resolved = (path.parent / target).resolve()
            if resolved.is_dir():
                resolved = resolved / "index.html"
            lacks_anchor = parts.fragment and resolved in pages and unquote(parts.fragment) not in pages[resolved].ids
            if not resolved.is_file() or lacks_anchor:
                broken.append(f"{path.relative_to(site)}: {link}")
    return broken


@pytest.mark.slow
def test_the_worked_example_s_code_is_on_its_page(site, pages):
    code = (ROOT / "docs" / "examples" / "l2_anchor.py").read_text(encoding="utf-8").strip()
    blocks = [block.strip() for block in pages[site / "adding-a-method" / "index.html"].code_blocks]
    assert code in blocks, (
        "docs/adding-a-method.md does not show docs/examples/l2_anchor.py: its include line must read "
        '--8<-- "l2_anchor.py" (pymdownx.snippets) inside the ```python block'
    )


def test_no_page_shows_an_include_line(pages):
    """A snippet include that did not run (a mangled `--8<--` line) shows as text in its code block."""
    include = re.compile(r"^\s*-+\s*8\s*<\s*-+", re.MULTILINE)
    shown = [str(path) for path, page in pages.items() if any(include.search(block) for block in page.code_blocks)]
    assert not shown, f"pages showing a pymdownx.snippets include line instead of the file: {shown}"


def test_every_link_of_the_site_lands(site, pages):
    broken = broken_links(site, pages)
    assert not broken, (
        "links to a page or anchor the site lacks (in a docstring, text like [a](b) renders as a link: "
        f"put it in backticks): {broken}"
    )


def test_docstring_roles_render_as_references(site):
    """docs/reference/rst_roles.py turns a docstring's :func:`x` into a link (or code), never the role's text."""
    role = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc):<code>")
    shown = [str(path) for path in sorted((site / "reference").rglob("*.html")) if role.search(path.read_text())]
    assert not shown, f"pages showing a reST role as text (mkdocs.yml: the rst_roles extension): {shown}"


def test_every_module_of_codyra_has_an_api_entry(site, pages):
    modules = set()
    for path in (ROOT / "src" / "codyra").rglob("*.py"):
        parts = path.relative_to(ROOT / "src").with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            modules.add(".".join(parts))
    entries = set().union(*(page.ids for path, page in pages.items() if "reference" in path.parts))
    missing = sorted(modules - entries)
    assert not missing, f"modules no page of docs/reference/ renders (add a '::: module' line): {missing}"


def test_signatures_show_their_annotations(site, pages):
    """Each documented function of codyra.store.io: its rendered signature holds every annotation of its source."""
    source = ROOT / "src" / "codyra" / "store" / "io.py"
    functions = [
        node
        for node in ast.parse(source.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) and not node.name.startswith("_")
    ]
    signatures = pages[site / "reference" / "store" / "index.html"].signatures
    assert functions
    for function in functions:
        shown = signatures.get(f"codyra.store.io.{function.name}", "")
        assert shown.startswith(f"{function.name}("), (
            f"no signature block for {function.name} (mkdocs.yml: separate_signature, show_signature_annotations)"
        )
        args = function.args.posonlyargs + function.args.args + function.args.kwonlyargs
        for arg in args:
            if arg.annotation is not None:
                assert f"{arg.arg}: {ast.unparse(arg.annotation)}" in shown, (function.name, shown)
        if function.returns is not None:
            assert re.search(rf"-> {re.escape(ast.unparse(function.returns))}$", shown), (function.name, shown)
