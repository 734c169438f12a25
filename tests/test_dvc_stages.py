"""dvc.yaml against the code: each stage's deps, outs and params are what its declaration
(``STAGE`` in pipeline/<stage>/contract.py) and its imports say, so no output goes stale.

For every stage: the modules inside ``pipeline/`` that its command imports (transitively, from the
import graph, package ``__init__`` files included) must each be covered by a dep, and every
``pipeline/`` dep must cover one of them; its data deps are exactly the files it declares it reads;
its outs and metrics exactly what it declares it writes; its params exactly the keys it declares.

The rule for package ``__init__.py`` files: a package ``__init__`` holds a docstring and nothing
else (no import, no code), so it changes no output and is no stage's dep; importing
``pipeline.fit.contract`` then does not run the fit stage's code. The one exception is
``pipeline/__init__.py``, which pins the floating-point kernels before numpy loads: it has code,
so it is a dep of every stage. ``test_package_inits_hold_no_code`` keeps that rule; an
``__init__`` given code anyway becomes a required dep of every stage importing through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from pipeline.config import PROJ_ROOT
from pipeline.runner import STAGES

grimp = pytest.importorskip("grimp")

PROCESSED, METRICS, PLOTS, HEADLINES = ("data/processed", "reports/metrics", "reports/plots",
                                        "reports/headline")


def _dvc() -> dict:
    return yaml.safe_load((PROJ_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def _names(entries: list) -> list[str]:
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries or []]


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("pipeline")


def imported_files(graph, stage) -> set[str]:
    """Project paths of the modules the stage's command runs: the CLI module itself, the runner,
    the headline writer and the stage's code, with everything they import inside ``pipeline``
    and every package ``__init__`` on the way. (The CLI's other commands import their code
    when they run: ``validate`` is no stage's dep.)"""
    roots = {"pipeline.runner", stage.module, *(() if stage.name == "report"
                                                 else ("pipeline.headline",))}
    modules = set(roots) | {"pipeline.__main__"}
    for root in roots:
        modules |= graph.find_upstream_modules(root)
    todo = set(modules)
    while todo:  # importing a.b.c runs a/__init__ and a/b/__init__ (and what they import)
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent not in modules:
                modules.add(parent)
                new = {parent} | graph.find_upstream_modules(parent)
                todo |= new - modules
                modules |= new
    files = set()
    for module in modules:
        path = PROJ_ROOT / Path(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if path.name == "__init__.py" and not _has_code(path):
            continue  # a docstring alone changes no output (code added to it becomes a dep)
        files.add(str(path.relative_to(PROJ_ROOT)))
    return files


def _has_code(path: Path) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               for node in body)


def expected_data(stage) -> set[str]:
    reads = {f"{PROCESSED}/{n}" for n in stage.reads}
    reads |= {f"{METRICS}/{s}.json" for s in stage.reads_metrics}
    reads |= set(stage.raw) | ({"data/catalog"} if stage.catalog else set())
    return reads


def expected_outs(stage) -> set[str]:
    outs = {f"{PROCESSED}/{n}" for n in stage.writes} | {f"{PLOTS}/{n}" for n in stage.plots}
    outs |= set(stage.outs)
    if stage.name != "report":
        outs.add(f"{METRICS}/{stage.name}.json")
    return outs


def _covers(dep: str, path: str) -> bool:
    return path == dep or path.startswith(dep.rstrip("/") + "/")


@pytest.mark.parametrize("name", list(STAGES))
def test_code_deps_are_the_imports(name: str, graph) -> None:
    entry = _dvc()[name]
    code = [d for d in _names(entry["deps"]) if d.startswith("pipeline")]
    imported = imported_files(graph, STAGES[name])
    missing = sorted(f for f in imported if not any(_covers(d, f) for d in code))
    dead = sorted(d for d in code if not any(_covers(d, f) for f in imported))
    assert not missing, f"dvc.yaml {name}: imported but not a dep: {missing}"
    assert not dead, f"dvc.yaml {name}: a dep the stage does not import: {dead}"


@pytest.mark.parametrize("name", list(STAGES))
def test_data_deps_outs_and_params_are_the_declaration(name: str) -> None:
    entry, stage = _dvc()[name], STAGES[name]
    data = {d for d in _names(entry["deps"]) if not d.startswith("pipeline")}
    assert data == expected_data(stage), f"dvc.yaml {name} deps"
    assert set(_names(entry["outs"])) == expected_outs(stage), f"dvc.yaml {name} outs"
    headline = {f"{HEADLINES}/{name}.json"} if name != "report" else set()
    assert set(_names(entry.get("metrics"))) == headline, f"dvc.yaml {name} metrics"
    assert set(entry.get("params") or []) == set(stage.params), f"dvc.yaml {name} params"


def test_every_stage_is_declared() -> None:
    assert list(_dvc()) == list(STAGES)


def test_a_removed_dep_is_caught(graph) -> None:
    """The check can fail: without pipeline/measures.py the fit stage's deps miss an import."""
    stage = STAGES["fit"]
    code = [d for d in _names(_dvc()["fit"]["deps"]) if d.startswith("pipeline")]
    assert "pipeline/measures.py" in code
    kept = [d for d in code if d != "pipeline/measures.py"]
    assert [f for f in imported_files(graph, stage) if not any(_covers(d, f) for d in kept)] \
        == ["pipeline/measures.py"]


# pipeline/__init__.py pins the numeric kernels (code, so a dep of every stage, listed in dvc.yaml)
INITS_WITH_CODE = {"pipeline/__init__.py"}


def test_package_inits_hold_no_code() -> None:
    """The module docstring's rule: every package ``__init__`` but the listed one is a docstring
    alone, so none is left out of a stage's deps while it changes what the stage computes."""
    with_code = {str(p.relative_to(PROJ_ROOT)) for p in sorted((PROJ_ROOT / "pipeline").rglob(
        "__init__.py")) if _has_code(p)}
    assert with_code == INITS_WITH_CODE, (
        f"package __init__ files with code: {sorted(with_code - INITS_WITH_CODE)}: keep them to a "
        "docstring (put the code in a module) or list them here and as deps in dvc.yaml")
