"""The generic step-log format: one JSON object per line (JSON Lines).

For any framework without a parser of its own: write one object per logged step. Keys (all
optional but ``step``; units in the names, as in ``runs.parquet``):

``step`` (int, required), ``step_time_s``, ``tokens_per_s`` (whole job),
``tokens_per_s_per_accelerator``, ``samples_per_s`` (whole job), ``batch_samples`` (sequences
in the global batch), ``loss``, ``tflops_per_accelerator``, ``mfu`` (a fraction, not a percent),
``time`` (Unix seconds, the wall clock when the step ended), ``rank``.

An object without ``step`` whose keys are format-v1 columns (``n_accelerators``, ``tp``,
``seq_len``, ``accelerator``, ...) states facts about the run, like a sidecar inside the log.
Example:
``{"n_accelerators": 64, "tp": 2, "seq_len": 4096}`` then
``{"step": 1, "step_time_s": 3.91, "tokens_per_s": 268000, "loss": 10.9}``.
"""

from __future__ import annotations

import io
import json
import math
import re
from array import array

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from pipeline.ingest.sources.steplogs.base import NAN, ParseState

NAME = "jsonl"
# How a complete step line ends (a JSON object ends with its closing brace): a last line without a newline that
# ends so is kept (reader._complete).
LINE_END_RE = re.compile(r"\}\s*$")
# Integers beyond int64 are no step number or per-step value (float() of 10^400 overflows).
_MAX_INT = 2**63
STEP_KEYS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_accelerator", "samples_per_s",
             "batch_samples", "loss", "tflops_per_accelerator", "mfu")
FACT_KEYS = ("accelerator", "n_accelerators", "model", "params_b", "n_layers", "d_model",
             "seq_len", "global_batch_tokens", "micro_batch", "dp", "tp", "pp", "cp", "ep",
             "zero_stage", "precision")


def _num(value: object) -> float:
    if value.__class__ is float:
        return value
    if value.__class__ is int:
        return float(value) if -_MAX_INT < value < _MAX_INT else NAN  # a 400-digit integer
    return NAN


_NUMBER_TYPES = frozenset((int, float, type(None)))
# Bytes Python's json refuses inside a line (raw control characters in strings).
_CONTROL = bytes(c for c in range(32) if c != 10)
_ARROW_SCHEMA = pa.schema([("step", pa.int64())]
                          + [(k, pa.float64()) for k in STEP_KEYS + ("time",)])
_ARROW_PARSE = pa_json.ParseOptions(explicit_schema=_ARROW_SCHEMA,
                                    unexpected_field_behavior="ignore")
_ARROW_READ = pa_json.ReadOptions(use_threads=False, block_size=1 << 23)
# Below this, Python's ``json`` (``_fast``) is quicker than the Arrow reader's ~0.7 ms of
# set-up per call (measured: 0.16 against 0.72 ms for a 30-step log of 2.7 kB; even at ~32 kB).
ARROW_MIN_CHARS = 1 << 15


def _column(values: list) -> array:
    return array("d", [NAN if v is None else v for v in values])


def detect(sample: str) -> int:
    """Twice the number of JSON step objects in ``sample`` (a parsed object with ``step`` is
    stronger evidence than the Trainer parser's ``{"loss": `` prefix, which it may share)."""
    if '"step"' not in sample:  # a counted line holds it: no split of another format's log
        return 0
    count = 0
    for line in sample.splitlines()[:2000]:
        line = line.strip()
        if line.startswith("{") and '"step"' in line:
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError, MemoryError):
                continue  # not JSON, or nested too deeply to be a step object
            count += isinstance(obj, dict) and any(k in obj for k in STEP_KEYS)
    return 2 * count


class Parser:
    """Feeds JSON Lines into a ``ParseState``."""

    def __init__(self, state: ParseState) -> None:
        self.state = state

    def feed_chunk(self, text: str, first_lineno: int, header: bool) -> None:
        """Parse a chunk of whole lines starting at line ``first_lineno``.

        Fast path: the chunk's lines are decoded as one JSON array (one C call) and kept
        when every line is a plain step object; any other chunk goes line by line.
        """
        if self._arrow(text, first_lineno):
            return
        lines = text.split("\n")
        if lines and not lines[-1]:
            lines.pop()
        if self._fast(lines, first_lineno):
            return
        counts = self.state.counts
        for offset, line in enumerate(lines):
            stripped = line.strip()
            if not stripped.startswith("{"):
                if stripped:
                    counts["non_json_lines"] += 1
                continue
            if "\x00" in stripped:
                counts["garbage_step_lines"] += 1
                continue
            self._line(stripped, first_lineno + offset)

    def _arrow(self, text: str, first_lineno: int) -> bool:
        """Fastest path: pyarrow's C++ JSON Lines reader, for a chunk whose every line is one
        plain step object (numbers parse to the same doubles as Python's ``json``).

        Taken only where it cannot differ from ``_fast``: every line ``{...}`` and as many rows
        as lines (a blank line or two objects on a line fall back), no ``"rank"`` key, no
        backslash escapes (which could spell one), no NaN/Infinity tokens and no control
        characters (which the C++ parser is laxer about than Python's), ``step`` an integer on
        every row; a value of another type is an error there, and any error falls back.
        """
        n = text.count("\n")
        if (len(text) < ARROW_MIN_CHARS or n < 2 or not text.startswith("{")
                or text.count("\n{") != n - 1 or text.count("}\n") != n or '"rank"' in text
                or "NaN" in text or "Inf" in text or "\\" in text):
            return False
        data = text.encode("utf-8")
        if len(data.translate(None, _CONTROL)) != len(data):
            return False
        try:
            table = pa_json.read_json(io.BytesIO(data),
                                      read_options=_ARROW_READ, parse_options=_ARROW_PARSE)
        except (pa.ArrowException, ValueError, OverflowError):
            return False
        if table.num_rows != n or table.column("step").null_count:
            return False
        cols = {("wall_s" if k == "time" else k): table.column(k).to_numpy().astype(np.float64)
                for k in STEP_KEYS + ("time",)}
        loss = table.column("loss")
        nan_loss = ~np.isfinite(cols["loss"]) & ~loss.is_null().to_numpy()
        self.state.extend(table.column("step").to_numpy(),
                          np.arange(first_lineno, first_lineno + n),
                          np.full(n, -1, dtype=np.int32), nan_loss, **cols)
        return True

    def _fast(self, lines: list[str], first_lineno: int) -> bool:
        if not lines or "\x00" in lines[0]:
            return False
        try:
            objs = json.loads("[" + ",".join(lines) + "]")
        except (ValueError, RecursionError, MemoryError):
            return False
        if len(objs) != len(lines) or set(map(type, objs)) != {dict}:
            return False
        steps = [o.get("step") for o in objs]
        if set(map(type, steps)) != {int} or any("rank" in o for o in objs):
            return False
        cols = {}
        for key in STEP_KEYS + ("time",):
            values = [o.get(key) for o in objs]
            if not set(map(type, values)) <= _NUMBER_TYPES:
                return False  # text, bools, lists: the line-by-line path says what they are
            cols[key] = values
        loss = cols["loss"]
        try:  # an integer beyond a double or int64: the line path counts that line alone
            if not -_MAX_INT < min(steps) <= max(steps) < _MAX_INT:
                return False
            arrays = {("wall_s" if k == "time" else k): _column(v) for k, v in cols.items()}
        except OverflowError:
            return False
        self.state.extend(steps, range(first_lineno, first_lineno + len(objs)),
                          [-1] * len(objs),
                          [v is not None and not math.isfinite(v) for v in loss], **arrays)
        return True

    def _line(self, stripped: str, lineno: int) -> None:
        st = self.state
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError, MemoryError):
            st.counts["garbled_step_lines" if stripped.count("{") > 1
                      else "unparsed_step_lines"] += 1
            return
        if not isinstance(obj, dict):
            st.counts["unparsed_step_lines"] += 1
            return
        step = obj.get("step")
        if step is None:
            for key in FACT_KEYS:
                if key in obj and obj[key] is not None and not isinstance(obj[key], (dict, list)):
                    st.fact(key, obj[key], lineno)
            return
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not \
                -_MAX_INT < step < _MAX_INT or not math.isfinite(step) or step != int(step):
            st.counts["unparsed_step_lines"] += 1
            return
        get = obj.get
        for key in STEP_KEYS + ("time",):
            value = get(key)
            if value is not None and value.__class__ not in (int, float):
                st.counts[f"non_number:{key}"] += 1
                if st.counts[f"non_number:{key}"] == 1:
                    st.bad_values.append((key, value, lineno))
        rank = get("rank")
        loss_given = get("loss") is not None
        loss = _num(get("loss"))
        st.add(int(step), lineno,
               rank if isinstance(rank, int) and not isinstance(rank, bool) else -1,
               nan_loss=loss_given and not math.isfinite(loss),
               step_time_s=_num(get("step_time_s")), tokens_per_s=_num(get("tokens_per_s")),
               tokens_per_s_per_accelerator=_num(get("tokens_per_s_per_accelerator")),
               samples_per_s=_num(get("samples_per_s")), batch_samples=_num(get("batch_samples")),
               loss=loss, tflops_per_accelerator=_num(get("tflops_per_accelerator")),
               mfu=_num(get("mfu")), wall_s=_num(get("time")))

    def finish(self) -> None:
        """Nothing is pending at the end of a JSON Lines log."""
