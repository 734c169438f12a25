"""The commands in the guides run as written, so the docs cannot rot.

Every fenced block of a guide below whose info string is ``bash`` or ``python`` is run from the
project root (bash with ``-euo pipefail``; Python with the project's interpreter) and must exit
0. A block that is an example not to run here (it needs ``make report``'s outputs, takes
minutes, or changes the workspace) says so in its info string: ```` ```bash no-run ````
(GitHub still highlights it as bash). Other languages (yaml, json, text) are shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import PROJ_ROOT

# The guides whose commands are run here; add a guide when it has commands of its own.
GUIDES = ("README.md", "docs/your-logs.md", "docs/experiments.md", "CONTRIBUTING.md")
RUNNABLE = {"bash", "python"}
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)


def blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of a Markdown text."""
    return [(m.group(1).strip(), m.group(2)) for m in _FENCE.finditer(text)]


def _runnable() -> list[tuple[str, int, str, str]]:
    found = []
    for guide in GUIDES:
        path = PROJ_ROOT / guide
        if not path.exists():
            continue
        for i, (info, body) in enumerate(blocks(path.read_text(encoding="utf-8"))):
            if info in RUNNABLE:
                found.append((guide, i, info, body))
    return found


def test_the_block_finder_reads_info_strings():
    text = "a\n```bash\necho 1\n```\n\n```bash no-run\nmake report\n```\n```yaml\nk: v\n```\n"
    assert blocks(text) == [("bash", "echo 1\n"), ("bash no-run", "make report\n"),
                            ("yaml", "k: v\n")]


def test_every_shell_or_python_block_is_run_or_marked():
    for guide in GUIDES:
        path = PROJ_ROOT / guide
        if not path.exists():
            continue
        for info, _ in blocks(path.read_text(encoding="utf-8")):
            words = info.split()
            if words and words[0] in {"bash", "sh", "shell", "console", "python", "py"}:
                assert info in RUNNABLE or words[1:] == ["no-run"], \
                    f"{guide}: block '{info}': use ```bash or ```python (run by this test) or " \
                    "add 'no-run'"


@pytest.mark.parametrize("guide,index,info,body", _runnable(),
                         ids=[f"{g}#{i}" for g, i, _, _ in _runnable()])
def test_a_guide_block_runs(guide, index, info, body, tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    cmd = (["bash", "-euo", "pipefail", "-c", body] if info == "bash"
           else [sys.executable, "-c", body])
    done = subprocess.run(cmd, cwd=PROJ_ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{guide} block {index}:\n{body}\n{done.stdout}\n{done.stderr}"
