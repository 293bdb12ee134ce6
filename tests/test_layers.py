"""The import rules of the layers (docs/architecture.md), checked on the source's import graph,
and the order in which that page lists the layers.

Every ``import`` and ``from ... import`` of a codyra module counts: inside functions, under
``if TYPE_CHECKING:``, relative or absolute. A package is a first-level folder of codyra
(experiment, store, training, ...); a top-level module (cli, family, errors, ...) is a node
of its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "codyra"
ARCHITECTURE = SRC.parents[1] / "docs" / "architecture.md"
FAMILIES = ("clip", "llm", "blip")


def module_name(path: Path, root: Path) -> str:
    parts = ["codyra", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, name: str, known: set[str]) -> set[str]:
    """The codyra modules ``path`` (module ``name``) imports anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # codyra.x.y.attribute -> the module codyra.x.y
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the codyra modules it imports."""
    files = {module_name(p, root): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    return {name: imported_modules(path, name, set(files)) for name, path in files.items()}


def node(module: str) -> str:
    """The layer a module belongs to: its first-level package, or itself at the top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "codyra"


def in_layer(module: str, layer: str) -> bool:
    return node(module) == layer


def package_cycles(edges: dict[str, set[str]]) -> list[str]:
    """Each group of packages that import one another, directly (a <-> b) or through a chain
    (a -> b -> c -> a): a strongly connected component of more than one package, with the
    imports between its members."""
    graph: dict[str, set[str]] = {}
    for a, targets in edges.items():
        graph.setdefault(node(a), set()).update(node(b) for b in targets if node(b) != node(a))
    reach = {x: set(ys) for x, ys in graph.items()}
    for k in graph:  # transitive closure (Floyd-Warshall): a few dozen nodes
        for x in graph:
            if k in reach[x]:
                reach[x] |= reach.get(k, set())
    groups = {frozenset({x} | {y for y in reach[x] if x in reach.get(y, set())}) for x in graph if x in reach[x]}
    return [
        f"{' -> '.join(sorted(group))}: "
        + ", ".join(
            sorted(
                f"{a} -> {b}"
                for a, bs in edges.items()
                for b in bs
                if node(a) in group and node(b) in group and node(a) != node(b)
            )
        )
        for group in sorted(groups, key=sorted)
    ]


def family_file(module: str) -> bool:
    """``methods/<kind>/<family>.py`` or a private helper's ``methods/_<name>/<family>.py``."""
    parts = module.split(".")
    return len(parts) == 4 and parts[1] == "methods" and parts[3] in FAMILIES


def violations(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each rule with the imports that break it."""
    found = {
        "no packages import one another, directly or through a chain": package_cycles(edges),
        "store imports only store and errors": [],
        "training imports neither experiment nor tracking": [],
        "clip and llm never import methods": [],
        "a method reaches its family only in methods/<kind>/<family>.py": [],
        "a method imports neither experiment, store.paths nor tracking": [],
    }
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            edge = f"{a} -> {b}"
            if in_layer(a, "store") and not (in_layer(b, "store") or b == "codyra.errors"):
                found["store imports only store and errors"].append(edge)
            if in_layer(a, "training") and node(b) in ("experiment", "tracking"):
                found["training imports neither experiment nor tracking"].append(edge)
            if node(a) in FAMILIES and in_layer(b, "methods"):
                found["clip and llm never import methods"].append(edge)
            if in_layer(a, "methods") and node(b) in FAMILIES and not family_file(a):
                found["a method reaches its family only in methods/<kind>/<family>.py"].append(edge)
            if in_layer(a, "methods") and (node(b) in ("experiment", "tracking") or b == "codyra.store.paths"):
                found["a method imports neither experiment, store.paths nor tracking"].append(edge)
    return found


def documented_layers(page: str) -> dict[str, int]:
    """Each package (``store/``) or top-level module (``errors``) of the page's layer table, by its
    row: 0 is the lowest layer."""
    table = page.split("## The layers", 1)[1].split("\n|---", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[2] for line in table.splitlines()[1:]]
    return {name: k for k, cell in enumerate(rows) for name in re.findall(r"`(\w+)/?`", cell)}


def against_the_order(edges: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """The imports of a layer from one the page lists after it, and each package or top-level
    module the page does not list (the package root ``codyra`` aside)."""
    nodes = {node(m) for m in edges} | {node(b) for bs in edges.values() for b in bs}
    found = [f"{n} is not in the table" for n in sorted(nodes - set(layers) - {"codyra"})]
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            if layers.get(node(b), -1) > layers.get(node(a), len(layers)):
                found.append(f"{a} -> {b}")
    return found


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "codyra" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "codyra"


def test_the_graph_counts_lazy_relative_and_type_checking_imports(tmp_path):
    root = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "store/__init__.py": "",
            "store/io.py": "from ..errors import X\nfrom . import paths\n",
            "store/paths.py": "",
            "training/__init__.py": "",
            "training/loop.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from codyra.store.io import Y\n"
                "def f():\n    import codyra.store.paths\n"
            ),
        },
    )
    assert import_graph(root) == {
        "codyra": set(),
        "codyra.errors": set(),
        "codyra.store": set(),
        "codyra.store.io": {"codyra.errors", "codyra.store.paths"},
        "codyra.store.paths": set(),
        "codyra.training": set(),
        "codyra.training.loop": {"codyra.store.io", "codyra.store.paths"},
    }


def test_each_rule_names_the_imports_that_break_it(tmp_path):
    root = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "store/__init__.py": "",
            "store/cells.py": "from codyra import __version__\nfrom codyra.errors import E\n",
            "training/__init__.py": "",
            "training/loop.py": "def f():\n    from codyra.tracking.mirror import JobRun\n",
            "tracking/__init__.py": "",
            "tracking/mirror.py": "from codyra.training.loop import f\n",
            "clip/__init__.py": "",
            "clip/evaluate.py": "from codyra.methods.rail import clip\n",
            "methods/__init__.py": "",
            "methods/lwf.py": "from codyra.experiment.config import resolve_job\nfrom codyra.clip.model import M\n",
            "methods/rail/__init__.py": "",
            "methods/rail/clip.py": "from codyra.clip.model import M\nfrom codyra.store.paths import task_dir\n",
            "methods/_prompting/__init__.py": "",
            "methods/_prompting/llm.py": "from codyra.llm.loss import L\n",
            "experiment/__init__.py": "",
            "experiment/config.py": "",
            "store/paths.py": "",
            "llm/__init__.py": "",
            "llm/loss.py": "",
            "clip/model.py": "",
            "data/__init__.py": "",  # a chain of three: no two of them import each other
            "data/x.py": "from codyra.trace.y import f\n",
            "trace/__init__.py": "",
            "trace/y.py": "from codyra.mini.z import g\n",
            "mini/__init__.py": "",
            "mini/z.py": "from codyra.data.x import h\n",
        },
    )
    assert violations(import_graph(root)) == {
        "no packages import one another, directly or through a chain": [
            (
                "clip -> methods: codyra.clip.evaluate -> codyra.methods.rail.clip, "
                "codyra.methods.lwf -> codyra.clip.model, codyra.methods.rail.clip -> codyra.clip.model"
            ),
            (
                "data -> mini -> trace: codyra.data.x -> codyra.trace.y, codyra.mini.z -> codyra.data.x, "
                "codyra.trace.y -> codyra.mini.z"
            ),
            (
                "tracking -> training: codyra.tracking.mirror -> codyra.training.loop, "
                "codyra.training.loop -> codyra.tracking.mirror"
            ),
        ],
        "store imports only store and errors": ["codyra.store.cells -> codyra"],
        "training imports neither experiment nor tracking": ["codyra.training.loop -> codyra.tracking.mirror"],
        "clip and llm never import methods": ["codyra.clip.evaluate -> codyra.methods.rail.clip"],
        "a method reaches its family only in methods/<kind>/<family>.py": ["codyra.methods.lwf -> codyra.clip.model"],
        "a method imports neither experiment, store.paths nor tracking": [
            "codyra.methods.lwf -> codyra.experiment.config",
            "codyra.methods.rail.clip -> codyra.store.paths",
        ],
    }


GRAPH = import_graph(SRC)


@pytest.mark.parametrize("rule", list(violations({})))
def test_the_source_keeps_the_import_rules(rule):
    broken = violations(GRAPH)[rule]
    assert not broken, f"{rule}; broken by:\n" + "\n".join(broken)


def test_the_order_check_names_an_upward_import_and_an_unlisted_package():
    page = (
        "## The layers\n\n| layer | package | what |\n|---|---|---|\n"
        "| low | `errors` (top-level) | x |\n| data | `data/`, `trace/` | y |\n| top | `cli` | z |\n\nmore text"
    )
    layers = documented_layers(page)
    assert layers == {"errors": 0, "data": 1, "trace": 1, "cli": 2}
    edges = {
        "codyra.data.x": {"codyra.trace.y", "codyra.errors"},  # within a row, and downwards
        "codyra.errors": {"codyra.data.x"},
        "codyra.cli": {"codyra.store.io"},
    }
    assert against_the_order(edges, layers) == ["store is not in the table", "codyra.errors -> codyra.data.x"]


def test_the_architecture_page_lists_every_layer_in_an_order_the_imports_keep():
    broken = against_the_order(GRAPH, documented_layers(ARCHITECTURE.read_text()))
    assert not broken, "docs/architecture.md, The layers, against the imports:\n" + "\n".join(broken)


# folders of tests/ for what crosses the packages: the guarantees, the DAG, the cluster path, golden numbers
CROSS_CUTTING = {"reliability", "workflow", "slurm", "golden"}


def test_the_tests_are_laid_out_like_the_source():
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in (SRC.parents[1] / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - packages - CROSS_CUTTING == set()
