"""Rewrite the ``deps`` of every stage in dvc.yaml from the code: the ``pipeline/`` modules its
command imports (a folder where every module in it is imported) and the files its declaration
says it reads. tests/test_dvc_stages.py holds the rule and fails when dvc.yaml differs; run this
after adding an import or an input::

    .venv/bin/python scripts/dvc_deps.py
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("dvc_rule", ROOT / "tests" / "test_dvc_stages.py")
rule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rule)


def collapse(files: set[str]) -> list[str]:
    """``files`` with each folder whose every module (code-less ``__init__`` aside) is listed
    replaced by the folder; package files first, then top-level modules."""
    chosen: list[str] = []
    for folder in sorted({str(Path(f).parent) for f in files}, key=len):
        if folder == "pipeline" or any(folder == c or folder.startswith(c + "/") for c in chosen):
            continue
        modules = {str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*.py")
                   if p.name != "__init__.py" or rule._has_code(p)}
        if modules <= files:
            chosen.append(folder)
    kept = set(chosen) | {f for f in files if not any(f.startswith(c + "/") for c in chosen)}
    return sorted(kept, key=lambda x: (x.count("/") == 1 and x.endswith(".py"), x))


def main() -> int:
    graph = rule.grimp.build_graph("pipeline")
    path = ROOT / "dvc.yaml"
    text = path.read_text(encoding="utf-8")
    for name, stage in rule.STAGES.items():
        deps = collapse(rule.imported_files(graph, stage)) + sorted(rule.expected_data(stage))
        block = "    deps:\n" + "".join(f"      - {d}\n" for d in deps)
        pattern = re.compile(rf"(\n  {name}:\n    cmd:(?:.*\n)*?)(    deps:\n(?:      - .*\n)+)")
        text, n = pattern.subn(lambda m: m.group(1) + block, text)
        if n != 1:
            raise SystemExit(f"dvc.yaml: no deps block for stage {name!r}")
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
