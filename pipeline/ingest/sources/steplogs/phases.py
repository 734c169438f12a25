"""Logs whose run changes shape part-way: never read as one run mixing the phases.

An elastic job that grows from 64 to 128 GPUs, a resumed job with another parallel layout or
batch, or a second job appended to the same file prints its configuration again. A run's N and
its step time must come from the same phase, so:

* a change of a shape fact the log states (``PHASE_KEYS``: N, the parallel degrees, batch,
  sequence length, model shape, precision, chip) rejects the log as ``phase_change``, naming
  each change with its line and the ``head``/``tail`` commands that split the file into one
  log per phase (each then becomes its own run, with its own N);
* a per-step global batch that changes in steady state (after warm-up: a batch ramp-up that
  outlasts the warm-up, or a resume with a new batch) keeps the steps at the final batch, the
  configured one, when there are at least ``min_steady_steps`` of them, and the notes count
  the steps of every other batch left out; otherwise the log is a ``phase_change`` reject.

A restart that resets the step counter without changing the shape is one phase (its segments
get their own warm-up: ``reduce``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.bounded import short

PHASE_KEYS = ("n_accelerators", "tp", "pp", "cp", "dp", "ep", "zero_stage", "micro_batch",
              "batch_samples", "global_batch_tokens", "seq_len", "n_layers", "d_model",
              "params_b", "precision", "accelerator")


def phase_change(changes: list[tuple[str, Any, Any, int]], shown: str) -> str | None:
    """The reject detail for a log whose stated shape changes (None: it does not)."""
    shape = [c for c in changes if c[0] in PHASE_KEYS]
    if not shape:
        return None
    listed = "; ".join(f"{key} {short(before)} -> {short(after)} at line {line}"
                       for key, before, after, line in shape[:5])
    more = f" (and {len(shape) - 5} more)" if len(shape) > 5 else ""
    first = shape[0][3]
    return (f"the run changes shape mid-log: {listed}{more}; one log must be one run: split it "
            f"into one file per phase (head -n {first - 1} {shown} > part1.log; tail -n "
            f"+{first} {shown} > part2.log)")


def final_batch_phase(batch: np.ndarray, steady: np.ndarray,
                      min_steps: int) -> tuple[np.ndarray, str | None, bool]:
    """(steady mask restricted to the final batch's steps, note, whether to reject).

    ``batch``: per-step global batch (NaN: not printed); ``steady``: the steady-state mask.
    """
    given = steady & np.isfinite(batch)
    values = batch[given]
    if len(values) == 0 or values.min() == values.max():
        return steady, None, False
    final = values[-1]
    kept = steady & ~(given & (batch != final))
    left_out = {float(v): int(n) for v, n in zip(*np.unique(values[values != final],
                                                           return_counts=True))}
    listed = ", ".join(f"{n} at {v:g}" for v, n in sorted(left_out.items()))
    n_kept = int(kept.sum())
    if n_kept < min_steps:
        return steady, (f"global batch changes in steady state ({listed}; {n_kept} at the final "
                        f"{final:g} sequences, fewer than min_steady_steps {min_steps}): "
                        "the phases cannot be told apart"), True
    return kept, (f"global batch changes in steady state: {n_kept} steps at the final batch "
                  f"{final:g} sequences kept, steps at other batches left out ({listed})"), False
