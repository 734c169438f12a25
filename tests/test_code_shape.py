"""The code rules of CONTRIBUTING.md that a machine can check, on the source text alone (AST, no
import of the package, well under a second):

* no function or method in ``pipeline/`` is longer than ``MAX_FUNCTION_LINES`` lines, counted from
  its ``def`` line to its last line (decorators, docstring and comments included);
* no two modules of ``pipeline/`` import each other, directly or through others (an import
  inside a function counts: a lazy import that hides a cycle is still a cycle).

Each checker is also run on a small bad example, so a checker that finds nothing cannot pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.config import PROJ_ROOT

MAX_FUNCTION_LINES = 80
PACKAGE = "pipeline"


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, length in lines) of every function or method in ``source`` over ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((node.name, length))
    return found


def module_name(path: Path, root: Path) -> str:
    """pipeline/report/books.py -> 'pipeline.report.books'; a package's __init__ -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (module ``module``) imports anywhere in its body.
    ``from a.b import c`` imports ``a.b.c`` when that is a module, else ``a.b``; relative imports
    are resolved against the module's package."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import pipeline.a.b` with b not a module
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, for every ``.py`` file under ``root/package``."""
    files = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    known = set(files)
    return {name: imported_modules(path.read_text(encoding="utf-8"), name,
                                   path.name == "__init__.py", known)
            for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative),
    each sorted; a module importing a package's ``__init__`` that imports it back counts too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_function_over_80_lines():
    too_long = [f"{p.relative_to(PROJ_ROOT)}:{name} ({length} lines)"
                for p in sorted((PROJ_ROOT / PACKAGE).rglob("*.py"))
                for name, length in long_functions(p.read_text(encoding="utf-8"))]
    assert not too_long, ("functions over 80 lines (split them; CONTRIBUTING.md):\n"
                          + "\n".join(too_long))


def test_no_import_cycle():
    graph = import_graph(PROJ_ROOT)
    assert "pipeline.report.render" in graph and graph["pipeline.report.render"]
    found = cycles(graph)
    assert not found, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_length_check_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    assert long_functions(f"def short():\n    return 1\n\ndef long():\n{body}\n") == [("long", 81)]
    method_body = body.replace("\n", "\n    ")
    assert long_functions(f"class A:\n    def m(self):\n    {method_body}\n") == [("m", 81)]


@pytest.mark.parametrize("b_source", ["from pkg import a\n",          # a <-> b
                                      "def f():\n    from .a import x\n",  # lazy, relative
                                      "import pkg.a as alias\n"])
def test_the_cycle_check_finds_a_cycle(tmp_path, b_source):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import helper\nimport json\n")
    (pkg / "b.py").write_text(b_source)
    (pkg / "c.py").write_text("from pkg import a, b\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.a", "pkg.b"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_no_cycle_in_a_chain(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import x\n")
    (pkg / "b.py").write_text("from pkg.c import y\n")
    (pkg / "c.py").write_text("import os\n")
    assert cycles(import_graph(tmp_path, "pkg")) == []
