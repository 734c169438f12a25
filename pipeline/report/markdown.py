"""Markdown escaping shared by the templates (render) and the tables (books).

Kept apart from both so that neither imports the other."""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

# Characters that are Markdown syntax anywhere in a line (GFM tables: "|"), and "_" where it
# can open or close emphasis (not between two letters or digits: "tp_pp" stays as it is).
_MD_SPECIAL = re.compile(r"[\\`*\[\]<>|~&]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|^[#+\-=]")
_LINE_BREAKS = re.compile(r"\s*[\r\n\u2028\u2029]+\s*")


def md_escape(value: Any) -> Markup:
    """``value`` as literal Markdown text: syntax characters backslash-escaped, line breaks
    (which would end a table row or a paragraph) joined with a space. Text already marked
    safe (template output, macro results) is returned as it is."""
    if isinstance(value, Markup):
        return value
    text = _LINE_BREAKS.sub(" ", str(value))
    return Markup(_MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text))
