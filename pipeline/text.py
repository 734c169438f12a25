"""Invisible characters in input text: bidirectional controls and zero-width characters.

A right-to-left override (U+202E) in a source or file name reorders what a reader sees where
the name is displayed (``report.html``, ``report.md``, ``scalewall validate``): ``gpt3.csv``
can be made to read as something else (the "Trojan Source" class, Boucher and Anderson 2021,
arXiv:2111.00169, CVE-2021-42574). Zero-width characters make two names that look the same
differ. So:

* ``strip_invisible`` removes them from names before they are used (the ingest does so for
  every text field of a run and notes it, so ``H100\\u200b`` resolves to the catalog's
  ``H100`` with a note instead of being an unknown accelerator);
* ``escape_invisible`` shows any that remain in displayed text as ``{U+202E}``: rendered
  reports, ``validate``'s output, reject reasons (``pipeline.bounded.cap``).
"""

from __future__ import annotations

import re

# Bidi controls (ALM, LRM, RLM, LRE/RLE/PDF/LRO/RLO, LRI/RLI/FSI/PDI) and zero-width or
# invisible formatting characters (ZWSP, ZWNJ, ZWJ, word joiner, invisible operators, BOM,
# Mongolian vowel separator, soft hyphen).
INVISIBLE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                       "\u2066-\u2069\ufeff]")


def strip_invisible(text: str) -> tuple[str, list[str]]:
    """(``text`` without invisible characters, their code points as ``U+XXXX``, sorted)."""
    found = INVISIBLE.findall(text)
    if not found:
        return text, []
    return INVISIBLE.sub("", text), sorted({f"U+{ord(c):04X}" for c in found})


def escape_invisible(text: str) -> str:
    """``text`` with each invisible character shown as ``{U+XXXX}``."""
    return INVISIBLE.sub(lambda m: f"{{U+{ord(m.group(0)):04X}}}", text)
