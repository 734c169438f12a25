"""Bounded text of input values for messages: a hostile input never makes a huge message.

Every message that quotes an input value (reject reasons, notes, errors) goes through
``short`` (a value) or ``cap`` (a text already built). ``short`` uses ``reprlib``, which stops
at a fixed depth and number of items, so a nested or alias-expanded value (a YAML "billion
laughs" of 10^9 strings) costs a few hundred bytes to describe, never its expansion.
"""

from __future__ import annotations

import reprlib
from typing import Any

from pipeline.text import escape_invisible

# Longest quoted value in a message, and longest whole message (reject reason, note).
VALUE_CHARS = 80
MESSAGE_CHARS = 2000

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 6
_REPR.maxstring = _REPR.maxother = VALUE_CHARS
_REPR.maxlong = 40


def cap(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with the count of those left out;
    bidi controls and zero-width characters shown as ``{U+XXXX}`` (``pipeline.text``)."""
    text = escape_invisible(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def short(value: Any, limit: int = VALUE_CHARS) -> str:
    """A bounded ``repr`` of ``value`` (depth, items and length capped), for messages."""
    try:
        text = _REPR.repr(value)
    except (RecursionError, MemoryError, ValueError):  # int too long to print, deep objects
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."
