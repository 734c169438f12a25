"""The one parser of numeric input fields: a value from any input -> a finite float, or a reason.

Every numeric field a reader takes from a table cell, a sidecar, a JSON line or a log goes
through ``parse_number``. It cannot raise anything but ``NumberError`` (whatever the size of the
value: a 400-digit integer, a 10^6-character cell), and its message quotes the value (bounded,
``pipeline.bounded.short``). ``NumberError.code`` is a reject code: ``bad_value`` for what is
not a number or not finite, ``out_of_range`` for a number outside the bounds the caller gives.

Accepted: ``int`` and ``float`` (not ``bool``), numpy numbers, and text of a decimal number
(``12``, ``-1.5``, ``.5``, ``1e-3``, ``+2E+05``; surrounding blanks ignored). Refused as text:
hex, octal, digit separators (``1_000``, ``1,000``), sexagesimal (``1:30``), words (``inf``,
``nan``, ``yes``), digits other than ASCII 0-9 (full-width ``１２``, Arabic-Indic ``١٢``): a
number that could be read two ways is not guessed, and every reader applies the same rule
(step logs' number pattern, ``steplogs.base.NUM``, is ASCII too).
"""

from __future__ import annotations

import math
import re
from numbers import Real
from typing import Any

from pipeline.bounded import short

# Longest numeric text read: a double has 17 significant digits, an exponent 3; a longer cell
# is no number a source printed on purpose (and float() of 10^6 digits costs real time).
MAX_NUMBER_CHARS = 64
# ASCII digits only (re.ASCII): full-width "１２" and Arabic-Indic "١٢" digits are refused like
# "1_024" -- one rule for every input, and a number only in the one way sources print it.
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_NON_FINITE_WORDS = frozenset(("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity",
                               "nan", "+nan", "-nan", ".inf", "-.inf", ".nan"))


class NumberError(ValueError):
    """A value that is not a usable number; ``code`` is a reject code, the message quotes it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _quoted(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<integer of {len(str(abs(value))) if value.bit_length() < 10_000 else 'many'} digits>"
    return short(value, 40)


def parse_number(value: Any, name: str, low: float | None = None, high: float | None = None,
                 low_open: bool = False) -> float | None:
    """``value`` as a finite float within [``low``, ``high``] (``low_open``: above ``low``).

    None, '' and blank text give None (not given). Raises ``NumberError`` otherwise.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise NumberError("bad_value", f"{name}={short(value)} is not a number")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if len(text) > MAX_NUMBER_CHARS:
            raise NumberError("bad_value", f"{name}={short(value, 40)} has {len(text)} "
                                           "characters: no number a source prints")
        if text.lower() in _NON_FINITE_WORDS:
            raise NumberError("bad_value", f"{name}={short(value)} is not a finite number")
        if not _DECIMAL.fullmatch(text):
            raise NumberError("bad_value", f"{name}={short(value)} is not a number" + (
                " (digits 0-9 only)" if any(c.isdigit() and not c.isascii() for c in text)
                else ""))
        number = float(text)
    elif isinstance(value, Real):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a double (copysign would overflow too)
            number = math.inf if value > 0 else -math.inf
    else:
        raise NumberError("bad_value", f"{name}={short(value)} is not a number")
    if not math.isfinite(number):
        raise NumberError("bad_value", f"{name}={_quoted(value)} is not a finite number")
    too_low = low is not None and (number <= low if low_open else number < low)
    if too_low or (high is not None and number > high):
        bounds = (f"{'(' if low_open else '['}{-math.inf if low is None else low:g}, "
                  f"{math.inf if high is None else high:g}]")
        raise NumberError("out_of_range", f"{name}={_quoted(value)} not in {bounds}")
    return number


def parse_count(value: Any, name: str, minimum: int = 0, maximum: int = 2**53) -> int | None:
    """``value`` as an integer in [``minimum``, ``maximum``] (``2.0`` is 2; ``2.5`` is refused)."""
    number = parse_number(value, name)
    if number is None:
        return None
    if number != int(number) or not minimum <= number <= maximum:
        raise NumberError("out_of_range", f"{name}={_quoted(value)} is not an integer in "
                                          f"{minimum}..{maximum}")
    return int(number)
