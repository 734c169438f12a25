"""The planner's request parser: any text is a layout or a PlanError naming the field, never
another exception; the batch the user gives is never changed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import math

from pipeline.plan.batch import default_sequences, odd_factor, resolve_batch, resolve_seq_len
from pipeline.plan.request import LAYOUT_KEYS, PlanError, finite, parse_layout

KEY = st.sampled_from(sorted(LAYOUT_KEYS) + ["x", "", "TP", "zero "])
VALUE = st.one_of(st.integers(-10, 10**9).map(str), st.text(max_size=6),
                  st.sampled_from(["none", "full", "true", "1e3", "inf", "nan", "4.5"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(KEY, VALUE), max_size=6))
def test_any_layout_text_is_parsed_or_refused_by_name(parts):
    text = ",".join(f"{k}={v}" for k, v in parts)
    try:
        out = parse_layout(text)
    except PlanError as exc:
        assert str(exc).startswith("--layout: ")
        return
    for col, value in out.items():
        assert col in LAYOUT_KEYS.values()
        if col in ("tp", "pp", "cp", "dp", "ep", "micro_batch", "virtual_pipeline"):
            assert value >= 1


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30),
                 st.text(max_size=5)))
def test_numbers_are_finite_in_range_or_refused(value):
    try:
        x = finite("--n", value, 1, 1e7, integer=True)
    except PlanError as exc:
        assert str(exc).startswith("--n: ")
        return
    assert 1 <= x <= 1e7 and x == int(x)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**6), st.sampled_from([1024, 2048, 4096, 8192]))
def test_a_given_batch_is_kept(sequences, seq_len):
    batch = resolve_batch(float(sequences * seq_len), None, seq_len, None)
    assert batch.tokens == sequences * seq_len and batch.assumed == ()


def test_a_default_batch_is_a_power_of_two_and_stated():
    batch = resolve_batch(None, None, 2048, 3.1e6)
    assert batch.sequences == 2048 and batch.assumed
    seq, assumed = resolve_seq_len(None, float("nan"), 4096)
    assert seq == 4096 and "theory.bounds.seq_len" in assumed[0]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**6), st.floats(1.0, 1e6))
def test_the_default_batch_at_n_is_the_nearest_power_of_two_times_its_odd_factor(n, critical):
    seqs = default_sequences(critical, n)
    odd = odd_factor(n)
    assert odd % 2 == 1 and n % odd == 0 and (n // odd) & (n // odd - 1) == 0
    assert seqs % odd == 0 and (seqs // odd) & (seqs // odd - 1) == 0
    # no other odd x 2^a (a >= 0) is nearer the critical batch in log2 (ties: either)
    a = int(math.log2(seqs // odd))
    for other in (a - 1, a + 1):
        if other >= 0:
            assert abs(math.log2(critical / (odd * 2 ** other))) \
                >= abs(math.log2(critical / seqs)) - 1e-9
    if odd == 1:  # a power-of-two N keeps the power-of-two rule
        assert seqs == 2 ** int(round(math.log2(critical)))


def test_a_default_batch_is_stated_per_n_where_it_differs():
    batch = resolve_batch(None, None, 8192, 1.27e6, (8, 72))
    assert batch.at(8).sequences == 128 and batch.at(72).sequences == 144
    assert "128 sequences = 1,048,576 tokens at N = 8" in batch.assumed[0]
    assert "144 sequences = 1,179,648 tokens at N = 72" in batch.assumed[0]
    given_batch = resolve_batch(8192.0 * 100, None, 8192, None)
    assert given_batch.at(72) is given_batch  # the user's batch is the same at every N


def test_sequences_and_tokens_must_agree():
    with pytest.raises(PlanError, match="give one of them"):
        resolve_batch(2048.0 * 100, 99, 2048, None)


def test_a_batch_that_does_not_split_into_sequences_is_named_as_given():
    # the message shows the user's number, never a rounded one (1.5 once read "2 tokens")
    with pytest.raises(PlanError, match=r"1\.5 tokens is not a whole number of 2048-token"):
        resolve_batch(1.5, None, 2048, None)
    with pytest.raises(PlanError, match=r"3145728\.4 tokens .* \(1536\.000195"):
        resolve_batch(3145728.4, None, 2048, None)
