"""The planner's batch: a whole number of sequences, as the user gave it or as a stated default.

The batch a user gives is never changed. ``--global-batch-tokens`` must be a whole number of
sequences (it is divided by ``--seq-len``); ``--layout gbs=`` gives it in sequences, as papers
state it. Where neither is given the default is the theory's critical batch for a
compute-optimal run of the model (``pipeline.plan.answer.default_batch_tokens``), rounded per N
to a power of two times the odd factor of N sequences (:func:`default_sequences`), and said so
in the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pipeline.plan.request import MAX_BATCH_TOKENS, MAX_SEQ_LEN, PlanError, finite


@dataclass(frozen=True)
class Batch:
    """Sequences per optimizer step, tokens per sequence, and the defaults that set them."""

    sequences: int
    seq_len: int
    assumed: tuple[str, ...] = ()
    #: the critical batch in sequences where the batch is the default (None: the user's batch,
    #: the same at every N)
    critical_sequences: float | None = None

    @property
    def tokens(self) -> int:
        return self.sequences * self.seq_len

    def at(self, n: int) -> "Batch":
        """The batch planned at N: the user's as given, the default rounded for this N."""
        if self.critical_sequences is None:
            return self
        seqs = default_sequences(self.critical_sequences, n)
        if seqs * self.seq_len > MAX_BATCH_TOKENS:
            raise PlanError("--n", f"at N = {n:,} the default batch, {seqs:,} sequences (a "
                            f"multiple of N's odd factor {odd_factor(n):,}), is above "
                            f"{MAX_BATCH_TOKENS:g} tokens per step; give --global-batch-tokens")
        return replace(self, sequences=seqs)


def odd_factor(n: int) -> int:
    """N without its factors of two (72 -> 9, 1024 -> 1)."""
    return n // (n & -n)


def default_sequences(critical_sequences: float, n: int) -> int:
    """The default batch at N in sequences: o 2^a nearest the critical batch in log2 (a >= 0),
    with o the odd factor of N. The searched tp and cp are powers of two, so dp carries N's odd
    factor wherever pp does not: a power of two alone (o = 1) would leave N = 24 or 72 no layout
    with dp = N / tp whose micro-batches split the batch. At a power-of-two N this is the
    critical batch to a power of two sequences."""
    o = odd_factor(int(n))
    return o * 2 ** max(0, int(round(math.log2(max(critical_sequences, 1.0) / o))))


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
                  default_tokens: float | None, ns: tuple[int, ...] = ()) -> Batch:
    """The step's batch (module docstring); ``default_tokens`` is used only when neither
    ``tokens`` nor ``sequences`` is given, rounded at each N of ``ns`` (stated in
    ``assumed``; :meth:`Batch.at` gives the batch at an N)."""
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
    return Batch(default_sequences(raw, 1), seq_len, (_default_said(raw, seq_len, ns),),
                 critical_sequences=raw)


def _default_said(raw: float, seq_len: int, ns: tuple[int, ...]) -> str:
    """The assumption a default batch states: its sequences (per N where they differ) and the
    rule."""
    by_seqs: dict[int, list[int]] = {}
    for n in ns or (1,):
        by_seqs.setdefault(default_sequences(raw, n), []).append(n)
    said = "; ".join(f"{s:,} sequences = {s * seq_len:,} tokens"
                     + (f" at N = {', '.join(f'{n:,}' for n in group)}" if len(by_seqs) > 1
                        else "") for s, group in by_seqs.items())
    rule = ("to a power of two sequences" if all(odd_factor(n) == 1 for n in ns) else
            "to a power of two times the odd factor of N, in sequences")
    return (f"global batch {said} (the theory's critical batch, {raw * seq_len:.3g} tokens, "
            f"{rule}; give --global-batch-tokens)")
