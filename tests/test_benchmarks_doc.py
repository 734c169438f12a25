"""docs/benchmarks.md is generated from the benchmarks' printed lines (benchmarks/document.py):
the generator is checked on made-up lines; nothing here is timed."""

from __future__ import annotations

from benchmarks.document import Figure, merge, parse_line, render

MACHINE = {"machine": "Test CPU, 2 cores, 24 GiB", "date": "2026-01-02 03:04 UTC",
           "commit": "abc123", "command": "make bench"}


def test_a_line_splits_into_figure_measured_and_target():
    assert parse_line("calibrate stage: 43.4 CPU s, 48.1 s wall (target: < 60 s)") == \
        Figure("calibrate stage", "43.4 CPU s, 48.1 s wall", "< 60 s")
    assert parse_line("ingest_stage_s: 2.50 (target < 20; 2.5 CPU-s in this process)") == \
        Figure("ingest_stage_s", "2.50 (2.5 CPU-s in this process)", "< 20")
    assert parse_line("plan search: 0.18 s wall (3 rows; target: < 2 s)") == \
        Figure("plan search", "0.18 s wall (3 rows)", "< 2 s")
    assert parse_line("ranking: Spearman 0.66 (targets >= 0.75, <= 10%: missed)") == \
        Figure("ranking", "Spearman 0.66", ">= 0.75, <= 10%: missed")
    assert parse_line("mlperf_reference_mlp_parser_MB_per_s: 7.2") == \
        Figure("mlperf_reference_mlp_parser_MB_per_s", "7.2", "")


def test_lines_that_are_no_figure_are_skipped():
    for line in ("", "== bench_fit", "no colon here", "  indented: detail line", "name: "):
        assert parse_line(line) is None, line


def test_the_page_names_machine_date_commit_and_puts_each_figure_beside_its_target():
    page = render(MACHINE, [("bench_theory", ["theory layout evaluations: 3,400,000 per s "
                                              "(target: >= 1,000,000 per s)", "a stray line"]),
                            ("bench_fit (exit 1)", [])])
    assert ("Measured 2026-01-02 03:04 UTC on Test CPU, 2 cores, 24 GiB; commit abc123; "
            "`make bench`.") in page
    assert "| theory layout evaluations | 3,400,000 per s | >= 1,000,000 per s |" in page
    assert "## bench_fit (exit 1)\n\nMeasured" in page and "(no figures printed)" in page
    assert "do not edit by hand" in page
    assert page.index("## bench_fit") < page.index("## bench_theory")


def test_a_run_of_some_benchmarks_replaces_their_sections_and_keeps_the_others():
    first = render(MACHINE, [("bench_fit", ["fit stage: 9.0 s (target: < 60 s)"]),
                             ("bench_theory", ["theory: 1 per s"])])
    later = {**MACHINE, "date": "2026-02-03 04:05 UTC", "commit": "def456",
             "command": "python -m benchmarks bench_theory"}
    page = merge(first, later, [("bench_theory (exit 1)", ["theory: 2 per s"])])
    assert "| fit stage | 9.0 s | < 60 s |" in page and "commit abc123; `make bench`" in page
    assert "| theory | 2 per s | - |" in page and "| theory | 1 per s |" not in page
    assert "2026-02-03 04:05 UTC" in page and page.count("## ") == 2
    assert merge(page, later, []) == page  # nothing rerun: the page as it was
    assert merge(None, MACHINE, [("bench_fit", [])]).count("## ") == 1


def test_a_pipe_in_a_figure_does_not_break_the_table():
    page = render(MACHINE, [("b", ["a|b: 1 | 2 (target: < 3)"])])
    assert "| a\\|b | 1 \\| 2 | < 3 |" in page
