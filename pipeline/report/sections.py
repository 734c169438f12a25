"""The report's sections, in reading order: one entry each, one pair of templates each.

A section is ``templates/sections/<id>.html.j2`` and ``templates/sections/<id>.md.j2``; both
follow the same pattern: the claim (one sentence, its numbers computed), the figure that shows
it, then the detail (short tables; long ones go to the appendix through ``tables.table``).

To add a section: write its two templates and a ``Section`` here; ``build`` (optional) computes
its context from the stage outputs and the ``report`` settings, and the templates read it as
``<id>`` (the keys the core report computes are in ``findings.build``); ``when`` (optional)
shows it only where the context says so.

The body is every section before the first whose title starts with "Appendix" (the findings and
their evidence: at most ``BODY_CHARACTERS`` characters of Markdown, checked by
tests/test_report_shape.py); what a reader needs only to check the work (the data, the method,
tables longer or wider than the page) goes after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pipeline.config import ReportSettings
from pipeline.report.coverage import section as coverage_section
from pipeline.report.memory import memory_section
from pipeline.report.moe import moe_section


# The report's body (before the first "Appendix" section), in characters of its Markdown.
BODY_CHARACTERS = 25_000
APPENDIX = "Appendix"


@dataclass(frozen=True)
class Section:
    id: str
    title: str  # the heading, and the entry of the contents line
    build: Callable[[Any, dict[str, Any]], Any] | None = None
    when: Callable[[dict[str, Any]], bool] | None = None

    def shown(self, context: dict[str, Any]) -> bool:
        # a section with a ``build`` shows only where its context was built
        built = self.build is None or self.id in context
        return built and (self.when is None or bool(self.when(context)))


def has_user_runs(context: dict[str, Any]) -> bool:
    """The user has runs of their own (step logs, or the ``report.focus`` sources): series, runs
    in no series or rejected logs. Without any, "Your runs" is not shown; the findings end with a
    one-line pointer instead."""
    mine = context.get("mine") or {}
    return bool(mine.get("series") or mine.get("n_runs") or mine.get("n_singles")
                or mine.get("n_rejected"))


SECTIONS: tuple[Section, ...] = (
    Section("yours", "Your runs", when=has_user_runs),
    Section("findings", "Key findings"),
    Section("series", "Scaling with N"),
    Section("strategy", "Parallelism strategy at scale"),
    Section("theory", "Against the data-movement ceiling"),
    Section("calibration", "What limits measured scaling"),
    Section("memory", "Memory per accelerator", lambda data, cfg: memory_section(data.metrics)),
    Section("moe", "Mixture of experts", lambda data, cfg: moe_section(data)),
    Section("laws", "How well the laws predict"),
    Section("hardware", "Hardware generations"),
    Section("power", "Power, energy and cost"),
    Section("coverage", "What the data cover", lambda data, cfg: coverage_section(data.runs)),
    Section("data", "Appendix: data"),
    Section("method", "Appendix: method and caveats"),
    Section("appendix", "Appendix: tables"),
)


def build_all(data: Any, cfg: ReportSettings) -> dict[str, Any]:
    """The context of every section that has a ``build``."""
    return {s.id: s.build(data, cfg) for s in SECTIONS if s.build is not None}
