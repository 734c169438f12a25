"""docs/theory.md §10.3-10.4 quote the calibration's figures as the metrics have them: the blocks
are written by scripts/theory_tables.py from reports/metrics/calibrate.json, and a stale doc
fails here."""

from __future__ import annotations

import copy
import importlib.util
import json

from pipeline.config import PROJ_ROOT

_spec = importlib.util.spec_from_file_location("theory_tables",
                                               PROJ_ROOT / "scripts" / "theory_tables.py")
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)


def _metrics() -> dict:
    return json.loads(tables.METRICS.read_text(encoding="utf-8"))


def test_docs_quote_the_current_metrics() -> None:
    assert tables.main(["--check"]) == 0, "stale: run scripts/theory_tables.py"


def test_a_changed_figure_changes_the_doc() -> None:
    metrics = _metrics()
    doc = tables.DOC.read_text(encoding="utf-8")
    changed = copy.deepcopy(metrics)
    changed["in_sample"]["median_ape"] = 0.123456
    assert "12.3 %" in tables.render(doc, changed).split("### 10.4")[0]
    assert tables.render(doc, changed) != tables.render(doc, metrics)


def test_the_chosen_form_is_marked() -> None:
    metrics = _metrics()
    block = tables.forms_block(metrics)
    assert f"| **{metrics['form']}** |" in block
    assert block.count("\n") == len(metrics["forms"]) + 1
