"""The planner's batch: a whole number of sequences, as the user gave it or as a stated default.

The batch a user gives is never changed. ``--global-batch-tokens`` must be a whole number of
sequences (it is divided by ``--seq-len``); ``--layout gbs=`` gives it in sequences, as papers
state it. Where neither is given the default is the theory's critical batch for a
compute-optimal run of the model (``pipeline.plan.answer.default_batch_tokens``), rounded to a
power-of-two number of sequences, and said so in the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipeline.plan.request import MAX_BATCH_TOKENS, MAX_SEQ_LEN, PlanError, finite


@dataclass(frozen=True)
class Batch:
    """Sequences per optimizer step, tokens per sequence, and the defaults that set them."""

    sequences: int
    seq_len: int
    assumed: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return self.sequences * self.seq_len


def resolve_seq_len(given: float | None, model_seq: float, theory_default: float
                    ) -> tuple[int, tuple[str, ...]]:
    """Tokens per sequence: given (a whole number, 1 to 1e7), else the model's, else the
    theory's default; with the assumption it made."""
    if given is not None:
        return int(finite("--seq-len", given, 1, MAX_SEQ_LEN, integer=True)), ()
    if math.isfinite(model_seq) and model_seq >= 1:
        return int(model_seq), (f"seq_len={int(model_seq)} (the model's context in "
                                "data/catalog/models.csv)",)
    return int(theory_default), (f"seq_len={int(theory_default)} (theory.bounds.seq_len)",)


def _shown(tokens: float) -> str:
    """A token count as the user gave it: 3145728, 1.5 (never rounded)."""
    return str(int(tokens)) if float(tokens).is_integer() else repr(float(tokens))


def resolve_batch(tokens: float | None, sequences: int | None, seq_len: int,
                  default_tokens: float | None) -> Batch:
    """The step's batch (module docstring); ``default_tokens`` is used only when neither
    ``tokens`` nor ``sequences`` is given."""
    if tokens is not None:
        t = finite("--global-batch-tokens", tokens, 0, MAX_BATCH_TOKENS, low_open=True)
        seqs = t / seq_len
        if seqs != math.floor(seqs):
            raise PlanError("--global-batch-tokens",
                            f"{_shown(t)} tokens is not a whole number of {seq_len}-token "
                            f"sequences ({seqs:.10g} sequences); give a multiple of {seq_len}, "
                            "or the batch in sequences with --layout gbs=")
        if sequences is not None and int(seqs) != sequences:
            raise PlanError("--layout", f"gbs={sequences} sequences x {seq_len} tokens = "
                            f"{sequences * seq_len} tokens, but --global-batch-tokens is "
                            f"{_shown(t)}: give one of them")
        return Batch(int(seqs), seq_len)
    if sequences is not None:
        if sequences * seq_len > MAX_BATCH_TOKENS:
            raise PlanError("--layout", f"gbs={sequences} x {seq_len} tokens is above "
                            f"{MAX_BATCH_TOKENS:g} tokens per step")
        return Batch(int(sequences), seq_len)
    raw = max(float(default_tokens or seq_len) / seq_len, 1.0)
    seqs = 2 ** int(round(math.log2(raw)))
    return Batch(seqs, seq_len, (f"global batch {seqs} sequences = {seqs * seq_len:,} tokens "
                                 f"(the theory's critical batch, {raw * seq_len:.3g} tokens, "
                                 "to a power of two sequences; give --global-batch-tokens)",))
