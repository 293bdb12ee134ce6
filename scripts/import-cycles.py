#!/usr/bin/env python
"""Print the import cycles among the modules of src/codyra (exit 1 if any).

Every ``import``/``from ... import`` of a codyra module counts, also inside functions (a lazy
import still ties the two modules together); ``if TYPE_CHECKING:`` blocks do not. An import of
``codyra.a.b`` also counts as one of its parent package ``codyra.a`` (Python runs it first).
Usage: python scripts/import-cycles.py [src/codyra]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            while target:  # the module and its parent packages
                if target != name:
                    found.add(target)
                target = target.rpartition(".")[0]
    return found


def graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    known = set(files)
    return {name: imports(path, name, known) for name, path in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def package_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The cycles, not counting a package's ``__init__`` importing its own submodules."""
    return cycles({k: {v for v in vs if not v.startswith(k + ".")} for k, vs in edges.items()})


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "src/codyra").resolve()
    edges = graph(root)
    found = package_cycles(edges)
    for comp in found:
        print("cycle:", " <-> ".join(comp))
        for a in comp:
            print(f"  {a} -> {', '.join(sorted(b for b in edges[a] if b in comp))}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
