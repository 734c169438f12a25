"""From the steps of one log to one run: ranks, restarts, clock jumps, warm-up, medians.

Order of work, per log:
1. Ranks: when launcher prefixes show several ranks, the rank with the most step lines is
   kept (ties: the lowest); the others' rows stay in ``steps.parquet`` with ``used`` false.
   Consecutive lines of the kept rank with the same step number are one step printed by
   several ranks without a prefix: the first is kept, the repeats are set aside and counted.
2. Restarts: a step number not above the previous one starts a new segment (a job resumed
   from a checkpoint into the same file); each segment has its own warm-up.
3. Step time: printed where the format prints it; else from the wall-clock stamps (torchtitan):
   seconds between logged steps over the steps between them, where a difference <= 0 or above
   ``CLOCK_JUMP_FACTOR`` times the segment's median is a clock jump, left out and counted; else
   ``batch_samples / samples_per_s`` (DeepSpeed). Printed times are checked against the stamps
   too: a stamp going back or leaping ahead by more than ``CLOCK_JUMP_FACTOR`` step times
   (plus a minute) is counted as a clock jump; the printed time is kept, the stamps are not used.
4. Warm-up (``ingest.logs.warmup_steps``): an integer drops that many logged steps at the
   start of each segment. ``auto`` (default) drops the first steps until the step time settles:
   warm-up ends at the first logged step that, with the next one, lies within
   ``max(settle_tolerance * m, 3 * 1.4826 * MAD)`` of ``m``, the median of the segment's second
   half (MAD: its median absolute deviation), and never covers more than
   ``max_warmup_fraction`` of the segment. Warm-up is looked for at the start only, and only
   where training (or a restart) starts: when the log's first logged step is above
   ``WARMUP_HORIZON_STEPS`` the log opens mid-run and only leading steps at least
   ``MID_RUN_SLOW_FACTOR`` times the steady median are dropped.
5. Steady state: steps of the kept rank, past warm-up, with a finite step measure and a
   finite loss (NaN-loss steps are counted and left out). Fewer than ``min_steady_steps``:
   reject ``too_few_steps``. The run's ``step_time_s`` is their median, its interquartile range
   goes to the notes; throughput, TFLOP/s and MFU are medians of the printed per-step values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.ingest.sources.steplogs.base import FLAG_NAN_LOSS, ParseState
from pipeline.ingest.sources.steplogs.order_stats import median_finite, median_of, quartiles
from pipeline.ingest.sources.steplogs.phases import final_batch_phase

if TYPE_CHECKING:  # the ``ingest.logs`` group is passed in as validated
    from pipeline.config import LogsSettings

# A step longer than this is no training step (as ``ingest.core.plausible.MAX_STEP_TIME_S``).
MAX_STEP_TIME_S = 1e6

CLOCK_JUMP_FACTOR = 20.0
# Warm-up belongs to the start of training and to each restart: a log whose first logged step
# is above this (Megatron's default log interval, 100) opens in the middle of a run (an
# excerpt, or a job resumed into a new file), where only a step at least this many times the
# steady median is warm-up (a resume's compilation or checkpoint load), not a few percent of
# settling: nanotron#23's iterations 991-993 of 1,000 (45, 41.2, 39.4 ms) are three steady
# steps.
WARMUP_HORIZON_STEPS = 100
MID_RUN_SLOW_FACTOR = 2.0
# Whole-job over per-chip tokens/s must be this close to an integer to give N: nanotron prints
# both in 3 significant digits (22.8K / 11.4K), so their ratio is off by up to ~1 %.
N_RATIO_TOLERANCE = 0.02


@dataclass
class Reduced:
    """Per-step arrays for steps.parquet and the run-level figures."""

    columns: dict[str, np.ndarray]
    measures: dict[str, float] = field(default_factory=dict)
    derived: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Facts the steps imply (``n_accelerators`` from whole-job over per-chip tokens/s), with
    # how each was worked out.
    implied: dict[str, Any] = field(default_factory=dict)
    implied_how: dict[str, str] = field(default_factory=dict)
    n_steady: int = 0
    # The per-step batch changes in steady state and no phase can be kept (phases.py).
    phase_reject: bool = False
    first_line: int = 0
    last_line: int = 0


_DTYPES = {name: np.dtype(name) for name in ("int64", "int32", "int8", "float64")}


def _arr(a: Any, dtype: str) -> np.ndarray:
    # A view of the parsed column, not a copy: a log's steps are held once (the state must
    # not grow while the view lives; parsing is over by now). The dtype object, not its name:
    # parsing the name costs more than viewing a small log's column.
    dtype = _DTYPES[dtype]
    return np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)


def _runs(seg: np.ndarray) -> list[slice]:
    """The runs of equal values in ``seg`` (segment numbers: contiguous, never decreasing), as
    slices: views of the columns, not index arrays and copies, since a log may have millions
    of steps."""
    if not len(seg):
        return []
    if seg[0] == seg[-1]:  # never decreasing: one segment (the usual log), no search
        return [slice(0, len(seg))]
    bounds = [0, *(np.flatnonzero(seg[1:] != seg[:-1]) + 1).tolist(), len(seg)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def _segments(step: np.ndarray) -> np.ndarray:
    if not len(step):
        return np.zeros(0, dtype=np.int64)
    back = np.empty(len(step), dtype=bool)
    back[0] = False
    np.less_equal(step[1:], step[:-1], out=back[1:])
    return np.cumsum(back)


def _opens_mid_run(step: np.ndarray) -> bool:
    """Whether a log's first segment starts after ``WARMUP_HORIZON_STEPS`` (module docstring)."""
    return bool(len(step)) and int(step[0]) > WARMUP_HORIZON_STEPS


def warmup_count(x: np.ndarray, s: LogsSettings, mid_run: bool = False) -> int:
    """Logged steps of one segment to drop as warm-up (see module docstring, item 4).
    ``mid_run``: the log opens in the middle of a run (module docstring: only steps at least
    ``MID_RUN_SLOW_FACTOR`` times the steady median are warm-up there)."""
    n = len(x)
    if s.warmup_steps != "auto":
        return min(s.warmup_steps, n)
    finite = np.isfinite(x)
    tail = x[n // 2:][finite[n // 2:]]
    if n < 2 or not len(tail):
        return 0
    m = median_of(tail)
    cap = int(math.floor(s.max_warmup_fraction * n))
    if mid_run:
        slow = ~finite | (x >= MID_RUN_SLOW_FACTOR * m)
        return min(int(np.argmin(slow)) if not slow.all() else n, cap)
    band = max(s.settle_tolerance * abs(m), 3 * 1.4826 * median_of(np.abs(tail - m)))
    inside = finite & (np.abs(x - m) <= band)
    for i in range(n):
        if inside[i] and (i + 1 == n or inside[i + 1]):
            return min(i, cap)
    return cap


def _bad_time_note(t: np.ndarray, bad_time: np.ndarray, lines: np.ndarray) -> str:
    """The note on printed step times left out, by kind (negative, zero, too long)."""
    kinds = [(int((bad_time & (t < 0)).sum()), "negative"),
             (int((bad_time & (t == 0)).sum()), "zero"),
             (int((bad_time & (t > MAX_STEP_TIME_S)).sum()),
              f"above {MAX_STEP_TIME_S:g} s (infinite included)")]
    which = ", ".join(f"{k} {name}" for k, name in kinds if k)
    return (f"{int(bad_time.sum())} step(s) with a step time <= 0 or above {MAX_STEP_TIME_S:g} s"
            f" left out ({which}: lines {', '.join(map(str, lines))}"
            f"{', ...' if bad_time.sum() > 5 else ''})")


def _wall_step_time(step: np.ndarray, wall: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, int]:
    out = np.full(len(step), np.nan)
    jumps = 0
    for idx in _runs(seg):
        if idx.stop - idx.start < 2:
            continue
        dt = np.diff(wall[idx]) / np.diff(step[idx])
        good = np.isfinite(dt) & (dt > 0)
        if good.any():
            good &= dt <= CLOCK_JUMP_FACTOR * np.median(dt[good])
        jumps += int((np.isfinite(dt) & ~good).sum())
        out[idx.start + 1:idx.stop] = np.where(good, dt, np.nan)
    return out, jumps


def _stamp_jumps(step: np.ndarray, wall: np.ndarray, t: np.ndarray, seg: np.ndarray) -> int:
    jumps = 0
    for run in _runs(seg):
        w, st, tt = wall[run], step[run], t[run]
        finite = np.isfinite(w)
        if not finite.all():
            w, st, tt = w[finite], st[finite], tt[finite]
        if len(w) < 2:
            continue
        dt = np.diff(w)
        printed = tt[1:]
        if not np.isfinite(printed).all():  # (nan_to_num costs more than the rest; rarely needed)
            printed = np.nan_to_num(printed, nan=0.0)
        expected = printed * np.diff(st)
        jumps += int(((dt < 0) | (dt > CLOCK_JUMP_FACTOR * expected + 60.0)).sum())
    return jumps


def reduce_steps(st: ParseState, facts: dict[str, Any], s: LogsSettings) -> Reduced:
    """Reduce the steps of ``st``; ``facts`` are the merged log and sidecar values."""
    # A printed 0 (tokens/s, samples/s) gives an infinite time: left out as not finite.
    with np.errstate(divide="ignore", invalid="ignore"):
        return _reduce(st, facts, s)


def _reduce(st: ParseState, facts: dict[str, Any], s: LogsSettings) -> Reduced:
    """The body of ``reduce``: the steps of one rank, their step times, then the steady state.
    The helpers index the same step arrays through ``sel`` (a slice, a view, where one rank
    logged), so a million-step log is never copied per step of the reduction."""
    step = _arr(st.step, "int64")
    cols = {name: _arr(col, "float64") for name, col in st.cols.items()}
    nan_loss = (_arr(st.flags, "int8") & FLAG_NAN_LOSS) > 0
    rank = _arr(st.rank, "int32")
    red = Reduced(columns={})
    used = _one_rank(step, rank, red.notes)
    # One rank (the usual log): index with a slice, a view, not a copy of every column.
    sel: Any = slice(None) if used.all() else used
    seg = np.zeros(len(step), dtype=np.int64)
    seg[sel] = _segments(step[sel])
    n_restarts = int(seg.max()) if len(seg) else 0
    if n_restarts:
        back = np.flatnonzero(np.diff(seg[sel]) > 0) + 1
        where = ", ".join(f"line {int(_arr(st.line, 'int64')[sel][i])} (step "
                          f"{int(step[sel][i - 1])} -> {int(step[sel][i])})" for i in back[:5])
        red.notes.append(f"{n_restarts} restart(s), step numbers went back at {where}")
    t, batch = _step_times(st, facts, cols, step, seg, sel, red)
    steady, warm = _steady_steps(st, s, cols, t, batch, step, seg, sel, used, nan_loss, red)
    red.columns = {"step": step, "rank": rank, "segment": seg,
                   "line": _arr(st.line, "int64"), **cols, "step_time_s": t, "is_warmup": warm,
                   "is_nan_loss": nan_loss, "used": steady}
    if not red.n_steady:
        return red
    lines = red.columns["line"][steady]
    red.first_line, red.last_line = int(lines.min()), int(lines.max())
    _measures(red, cols, t, batch, steady, facts)
    return red


def _one_rank(step: np.ndarray, rank: np.ndarray, notes: list[str]) -> np.ndarray:
    """The mask of the steps kept: the most frequent rank's where ranks interleave, without the
    repeats of one step that ranks printing without a launcher prefix leave."""
    used = np.ones(len(step), dtype=bool)
    if len(step) and rank.min() != rank.max():
        ranks, counts = np.unique(rank, return_counts=True)
        kept = int(ranks[np.argmax(counts)])
        used = rank == kept
        notes.append(f"lines of ranks {', '.join(map(str, ranks.tolist()))} interleaved: kept "
                     f"rank {kept} ({int(used.sum())} steps), set aside {int((~used).sum())}")
    # Ranks that print without a launcher prefix (torchtitan under plain torchrun) repeat each
    # step line once per rank, one after another: the repeats are one step, not restarts.
    kept_idx = np.flatnonzero(used)
    repeats = kept_idx[1:][step[kept_idx[1:]] == step[kept_idx[:-1]]]
    if len(repeats):
        used[repeats] = False
        notes.append(f"{len(repeats)} repeated line(s) of the same step (ranks printing without "
                     "a prefix) set aside")
    return used


def _step_times(st: ParseState, facts: dict[str, Any], cols: dict[str, np.ndarray],
                step: np.ndarray, seg: np.ndarray, sel: Any,
                red: Reduced) -> tuple[np.ndarray, np.ndarray]:
    """(step time s, global batch samples) per step: the printed times, else from the log's
    time stamps or batch / samples per second (named in ``red.derived``); clock jumps noted."""
    notes = red.notes
    t = cols["step_time_s"].copy()  # filled in below where the format prints no time
    wall = cols["wall_s"]
    batch = cols["batch_samples"]
    batch_fact = facts.get("batch_samples")
    if batch_fact and not np.isfinite(batch).any():
        batch = np.full(len(step), float(batch_fact))
    if st.step_time_from_wall and not np.isfinite(t[sel]).any():
        t_used, jumps = _wall_step_time(step[sel], wall[sel], seg[sel])
        t[sel] = t_used
        if np.isfinite(t_used).any():
            red.derived.append("step_time_s")
            notes.append("step time from log timestamps (the format prints none)")
    elif not np.isfinite(t).any() and np.isfinite(cols["samples_per_s"]).any() \
            and np.isfinite(batch).any():
        t = batch / cols["samples_per_s"]
        red.derived.append("step_time_s")
        notes.append("step time = global batch / samples per second")
        jumps = _stamp_jumps(step[sel], wall[sel], t[sel], seg[sel])
    else:
        jumps = _stamp_jumps(step[sel], wall[sel], t[sel], seg[sel])
    if jumps and st.step_time_from_wall:
        notes.append(f"{jumps} clock jump(s) or pause(s): time stamps going back or leaping "
                     f"over {CLOCK_JUMP_FACTOR:g}x the median step; those intervals left out")
    elif jumps:
        notes.append(f"{jumps} clock jump(s) or pause(s) in the time stamps (going back, or "
                     f"ahead of the printed step times by {CLOCK_JUMP_FACTOR:g}x + 60 s); "
                     "timing uses the printed step times")
    return t, batch


def _steady_steps(st: ParseState, s: LogsSettings, cols: dict[str, np.ndarray], t: np.ndarray,
                  batch: np.ndarray, step: np.ndarray, seg: np.ndarray, sel: Any, used: np.ndarray,
                  nan_loss: np.ndarray, red: Reduced) -> tuple[np.ndarray, np.ndarray]:
    """(steady, warm-up) masks: each segment's warm-up dropped, steps with a NaN loss or an
    impossible step time left out, the final batch phase kept; ``red.n_steady`` and the summary
    note set."""
    notes = red.notes
    # The series that warm-up detection and the steady-state test look at.
    x = t.copy()
    for name in ("tokens_per_s", "tokens_per_s_per_accelerator", "samples_per_s"):
        if np.isfinite(x).any():
            break
        x = 1.0 / cols[name]
    warm = np.zeros(len(t), dtype=bool)
    n_warm = 0
    used_idx = None if isinstance(sel, slice) else np.flatnonzero(used)
    for i, part in enumerate(_runs(seg[sel])):
        idx = part if used_idx is None else used_idx[part]
        w = warmup_count(x[idx], s, mid_run=i == 0 and _opens_mid_run(step[idx]))
        if used_idx is None:
            warm[part.start:part.start + w] = True
        else:
            warm[idx[:w]] = True
        n_warm += w
    steady = used & ~warm & ~nan_loss & np.isfinite(x) & (x > 0)
    # A printed step time <= 0, infinite or over 10^6 s is no step: counted, never silent.
    bad_time = used & ~warm & ~np.isnan(t) & ((t <= 0) | (t > MAX_STEP_TIME_S))
    if bad_time.any():
        lines = _arr(st.line, "int64")[bad_time][:5]
        steady &= ~bad_time
        notes.append(_bad_time_note(t, bad_time, lines))
    steady, batch_note, red.phase_reject = final_batch_phase(batch, steady, s.min_steady_steps)
    if batch_note:
        notes.append(batch_note)
    n_nan = int((used & nan_loss).sum())
    red.n_steady = int(steady.sum())
    mode = "auto" if s.warmup_steps == "auto" else f"fixed {s.warmup_steps}"
    notes.insert(0, f"{int(used.sum())} steps logged, {n_warm} warm-up dropped ({mode}), "
                    f"{red.n_steady} steady")
    if n_nan:
        notes.append(f"{n_nan} step(s) with NaN/inf loss left out")
    return steady, warm


def _measures(red: Reduced, cols: dict[str, np.ndarray], t: np.ndarray, batch: np.ndarray,
              steady: np.ndarray, facts: dict[str, Any]) -> None:
    m = red.measures
    ts = t[steady]
    if np.isfinite(ts).any():
        q25, q50, q75 = quartiles(ts)
        m["step_time_s"] = float(q50)
        red.notes.append(f"step time median {q50:.6g} s, IQR {q25:.6g}-{q75:.6g} s")
    n = facts.get("n_accelerators")
    seq = facts.get("seq_len")
    tps = median_finite(cols["tokens_per_s"][steady])
    per_chip = median_finite(cols["tokens_per_s_per_accelerator"][steady])
    if not n and math.isfinite(tps) and per_chip > 0:
        # nanotron prints both; their ratio is the chip count, to the 3 digits they print.
        ratio = tps / per_chip
        if round(ratio) >= 1 and abs(ratio - round(ratio)) <= N_RATIO_TOLERANCE * ratio:
            red.implied["n_accelerators"] = n = int(round(ratio))
            red.implied_how["n_accelerators"] = (f"from tokens/s {tps:.6g} / tokens/s per chip "
                                                 f"{per_chip:.6g} = {ratio:.4g}")
    if not math.isfinite(tps) and n:
        tps = median_finite(cols["tokens_per_s_per_accelerator"][steady]) * n
        red.derived += ["tokens_per_s"] if math.isfinite(tps) else []
    if not math.isfinite(tps) and seq:
        tps = median_finite(cols["samples_per_s"][steady]) * seq
        if not math.isfinite(tps):
            tps = median_finite(batch[steady] * seq / t[steady])
        red.derived += ["tokens_per_s"] if math.isfinite(tps) else []
    if math.isfinite(tps):
        m["tokens_per_s"] = tps
    for name in ("tflops_per_accelerator", "mfu"):
        value = median_finite(cols[name][steady])
        if math.isfinite(value):
            m[name] = value
    b = median_finite(batch[steady])
    if math.isfinite(b) and seq:
        m["global_batch_tokens"] = b * seq
        red.derived.append("global_batch_tokens")
