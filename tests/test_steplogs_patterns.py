"""The step-counter patterns written literal first match exactly what their plain forms match.

A pattern that starts with ``\\b`` or a lookbehind is tried at every character; the formats
write theirs with the literal first and the boundary as a lookbehind after it. These tests fuzz
texts made of the pieces the patterns look at and compare every match (span and groups), from
any start position, of the plain form written here with the form the format module compiles.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.base import NUM
from pipeline.ingest.sources.steplogs.formats import megatron, nanotron, torchtitan

PLAIN = {
    "megatron": (re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|"), megatron._STEP_RE),
    "nanotron": (re.compile(r"\biteration: (\d+) / (\d+)"), nanotron._STEP_RE),
    "torchtitan": (re.compile(r"(?<![\w.])step:\s*(\d+)\s+loss:\s*(" + NUM + r")"),
                   torchtitan._STEP_RE),
    "torchtitan rate": (re.compile(r"\b(?:tps|wps):"), torchtitan._RATE_RE),
}
PIECES = ["iteration", "iteration ", "iteration: ", "step:", "step: ", "loss:", " loss: ",
          "tps:", "wps:", "xtps:", "_", ".", "x", "é", " ", "  ", "\t", "\n", "/", " / ", "|",
          " |", "1", "42", "7,5", "1e3", "nan", "-", ":", "[rank0]:", "Σ", "٣"]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def _matches(pattern: re.Pattern, text: str, pos: int) -> list:
    return [(m.span(), m.groups()) for m in pattern.finditer(text, pos)]


@settings(max_examples=1500, deadline=None)
@given(texts, st.integers(0, 8))
def test_literal_first_patterns_match_as_the_plain_ones(text: str, pos: int) -> None:
    pos = min(pos, len(text))
    for name, (plain, fast) in PLAIN.items():
        assert _matches(fast, text, pos) == _matches(plain, text, pos), name
        found = plain.search(text, pos)
        again = fast.search(text, pos)
        assert (found and (found.span(), found.groups())) == (again and (again.span(),
                                                                         again.groups())), name


def test_the_plain_forms_find_step_lines() -> None:
    """The fuzzing compares like with like: each plain form finds its format's counter."""
    line = {"megatron": " iteration       10/  100 | elapsed time per iteration (ms): 1.0 |",
            "nanotron": "[INFO|DP=0]: iteration: 10 / 100 | elapsed_time_per_iteration_ms: 1",
            "torchtitan": "[rank0]: step: 10  loss:  2.5  tps: 100", "torchtitan rate": "tps:"}
    glued = {"megatron": "xiteration 10/ 100 |", "nanotron": "_iteration: 10 / 100",
             "torchtitan": "substep: 10 loss: 2.5", "torchtitan rate": "xtps:"}
    for name, (plain, fast) in PLAIN.items():
        assert plain.search(line[name]) and fast.search(line[name]), name
        assert not plain.search(glued[name]) and not fast.search(glued[name]), name
