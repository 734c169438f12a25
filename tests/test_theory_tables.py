"""docs/theory.md §10 quotes the calibration's figures as the metrics have them: the blocks are
written by scripts/theory_tables.py from reports/metrics/calibrate.json, and a stale doc fails
here."""

from __future__ import annotations

import copy
import importlib.util
import json
import re

import pytest

from pipeline.config import PROJ_ROOT
from tests.workspace import require_shipped

_spec = importlib.util.spec_from_file_location("theory_tables",
                                               PROJ_ROOT / "scripts" / "theory_tables.py")
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)


def _metrics() -> dict:
    return json.loads(tables.METRICS.read_text(encoding="utf-8"))


def _doc() -> str:
    return tables.DOC.read_text(encoding="utf-8")


def _section(doc: str, start: str, end: str) -> str:
    return doc.split(start, 1)[1].split(end, 1)[0]


def test_docs_quote_the_current_metrics() -> None:
    # the doc quotes the committed pipeline's metrics; a user's own run changes them
    require_shipped("reports/metrics/calibrate.json")
    assert tables.main(["--check"]) == 0, "stale: run scripts/theory_tables.py"


def test_section_10_describes_one_model() -> None:
    doc = _doc()
    headings = re.findall(r"^### (10\.\d+)", doc, re.M)
    assert len(headings) == len(set(headings)), headings
    assert not re.search(r"^(<<<<<<<|=======|>>>>>>>)", doc, re.M)


@pytest.mark.parametrize(("path", "section"), [
    (("scores", "source_holdout", "megatron2021", "median_ape"), ("### 10.4", "### 10.5")),
    (("in_sample", "median_ape"), ("### 10.3", "### 10.4")),
    (("scores", "largest_k", "largest_k1", "macro_selected"), ("### 10.4", "### 10.5")),
])
def test_a_changed_figure_changes_the_doc(path: tuple[str, ...], section: tuple[str, str]) -> None:
    metrics = _metrics()
    changed = copy.deepcopy(metrics)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = 0.987654   # a figure no metric of the shipped data renders as
    doc = _doc()
    assert "98.8 %" in _section(tables.render(doc, changed), *section)
    assert "98.8 %" not in _section(tables.render(doc, metrics), *section)


def test_a_changed_parameter_changes_the_doc() -> None:
    metrics = _metrics()
    changed = copy.deepcopy(metrics)
    changed["parameters"]["megatron.compute_efficiency"].update(
        estimate=0.4321, ci_low=0.3111, ci_high=0.5999)
    block = _section(tables.render(_doc(), changed), "### 10.3", "### 10.4")
    assert "| megatron | 0.43 (0.31–0.6) |" in block


def test_the_chosen_form_is_marked() -> None:
    metrics = _metrics()
    block = tables.forms_block(metrics)
    assert f"| **{metrics['form']}** |" in block
    assert block.count("| **") == 1
    table = [line for line in block.splitlines() if line.startswith("|")]
    assert len(table) == len(metrics["forms"]) + 2
    other = next(f["form"] for f in metrics["forms"] if f["form"] != metrics["form"])
    changed = copy.deepcopy(metrics)
    changed["form"] = other
    assert f"| **{other}** |" in tables.forms_block(changed)


def test_a_block_without_a_renderer_is_refused() -> None:
    doc = _doc() + "\n<!-- begin: old_terms (scripts/theory_tables.py) -->\nx\n<!-- end: old_terms -->\n"
    with pytest.raises(SystemExit, match="old_terms"):
        tables.render(doc, _metrics())


def test_memory_scores_in_section_11_are_rendered_from_theory_metrics() -> None:
    theory = json.loads(tables.THEORY_METRICS.read_text(encoding="utf-8"))
    changed = copy.deepcopy(theory)
    changed["_memory"]["peak_memory"]["overall"]["median_ape"] = 0.987654
    doc = _doc()
    assert "median APE 98.8%" in tables.render(doc, _metrics(), changed)
    assert "median APE 98.8%" not in tables.render(doc, _metrics(), theory)
