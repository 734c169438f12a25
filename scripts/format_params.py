"""Rewrite params.yaml in the layout ``dvc exp run -S`` writes, so that an experiment's
``params.yaml`` differs from the committed one in the line set and nowhere else.

``dvc exp run -S key=value`` loads the file with ruamel.yaml (comments kept), applies the
override through Hydra/OmegaConf and merges the result back (``dvc.utils.hydra.
apply_overrides``): every list is replaced by a plain one (block style), strings are requoted
and long lines wrapped at 80 columns. This applies the same function with no override. A
comment or blank line right after a block list is attached to the list and lost at every
``-S``: in params.yaml a list is always followed by a key (tests/test_dvc_params_format.py).
Usage: ``.venv/bin/python scripts/format_params.py [params.yaml]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dvc.utils.hydra import apply_overrides


def main(path: str = "params.yaml") -> bool:
    """Rewrite ``path`` in DVC's layout; whether it changed."""
    before = Path(path).read_text(encoding="utf-8")
    apply_overrides(path, [])
    return Path(path).read_text(encoding="utf-8") != before


if __name__ == "__main__":
    changed = main(*sys.argv[1:])
    print("reformatted" if changed else "already in DVC's layout")
