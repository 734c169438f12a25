"""One digits rule for every input (pipeline/numbers.py, steplogs.base.NUM): ASCII 0-9 only;
full-width and Arabic-Indic digits are refused like digit separators ("1_024")."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.ingest.sources.steplogs.base import NUM
from pipeline.numbers import NumberError, parse_number


@pytest.mark.parametrize("text", ["１２", "١٢", "۱۲", "1_024", "1,024"])
def test_other_digits_and_separators_are_refused(text: str) -> None:
    with pytest.raises(NumberError) as info:
        parse_number(text, "tokens_per_s")
    assert info.value.code == "bad_value" and "tokens_per_s=" in str(info.value)


@given(st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=6))
def test_a_decimal_digit_string_is_a_number_only_in_ascii(text: str) -> None:
    ascii_only = text.isascii()
    try:
        parse_number(text, "x")
        read = True
    except NumberError as exc:
        read = False
        assert "digits 0-9 only" in str(exc)
    assert read == ascii_only
    assert bool(re.fullmatch(NUM, text)) == ascii_only
