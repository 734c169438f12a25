""""Your runs" shows single runs and rejected logs, by default and under ``--focus``, and the
Data table counts series as "Your runs" does (listed series only)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipeline.report.data import ReportData
from pipeline.report.findings import data_section
from pipeline.report.your_runs import FIXES, closest_published_runs, rejected_logs, single_runs


def _data(runs: list[dict], series: list[str] = (), rejects: list[dict] = (),
          comparison: list[dict] = (), alone: list[dict] = ()) -> ReportData:
    frames = {name: pd.DataFrame() for name in ("fits", "calibrated", "comparison_series",
                                                "comparison_curves")}
    frames.update(runs=pd.DataFrame(runs), series=pd.DataFrame({"series_id": list(series)}),
                  rejects=pd.DataFrame(list(rejects), columns=["source", "path", "line",
                                                               "record", "reason"]),
                  comparison=pd.DataFrame(list(comparison)))
    return ReportData(frames, {"ingest": {"logs_without_series": {"logs": list(alone)}}})


def _run(run_id, source, kind, n, params=8e9, family="H100", series_id=None, **kw):
    row = dict(run_id=run_id, source=source, source_kind=kind, n_accelerators=n,
               active_params=params, accelerator_family=family, accelerator="H100-SXM5-80GB",
               model="llama3-8b", status="ok", series_id=series_id, step_time_s=None,
               tokens_per_s=None, tokens_per_s_per_accelerator=None, mfu=None,
               provenance=f"data/raw/logs/{run_id}.log:3-40 (sidecar run.yaml)", citation="x",
               scaling=None)
    row.update(kw)
    return row


def test_single_run_has_measures_ceiling_and_closest_published_runs():
    runs = [_run("mine", "logs/a", "log", 64, step_time_s=2.6, tokens_per_s=2.0e5, mfu=0.41,
                 series_id="logs/a/s1"),
            _run("p8", "pub", "published", 8, tokens_per_s_per_accelerator=4000.0, mfu=0.5),
            _run("p64", "pub", "published", 64, tokens_per_s_per_accelerator=3500.0, mfu=0.45),
            _run("p70b", "pub", "published", 64, params=70e9),           # other size
            _run("a100", "pub", "published", 64, family="A100")]         # other family
    d = _data(runs, comparison=[{"run_id": "mine", "bound_mfu": 0.62, "share_compute": 0.5,
                                 "share_residual": 0.5}],
              alone=[{"path": "data/raw/logs/mine.log", "reason": "alone: no log at another N"}])
    (s,) = single_runs(d, [])
    assert (s["path"], s["n"], s["step_time_s"], s["mfu"]) == ("data/raw/logs/mine.log", 64, 2.6,
                                                               0.41)
    assert s["ceiling_mfu"] == 0.62 and s["why"].startswith("alone:")
    assert s["decomposition"]["model"] == "theory"
    # same family and size, nearest N first; the 70B and the A100 runs are not "alike"
    assert [p["n"] for p in s["published"]] == [64, 8]
    # a run whose series_id names a listed series is not single
    assert single_runs(_data(runs, series=["logs/a/s1"]), []) == []


def test_focus_selects_sources_and_keeps_single_runs():
    runs = [_run("mine", "logs/a", "log", 64, step_time_s=2.6),
            _run("p64", "pub", "published", 64, mfu=0.45)]
    d = _data(runs)
    assert [s["run_id"] for s in single_runs(d, ["pub"])] == ["p64"]
    assert [s["run_id"] for s in single_runs(d, [])] == ["mine"]


def test_rejected_logs_carry_reason_and_fix():
    rejects = [{"source": "logs/a", "path": "data/raw/logs/a/t4.log", "line": 0, "record": "",
                "reason": "missing_required: n_accelerators: neither the log nor a sidecar"},
               {"source": "logs", "path": "data/raw/logs/x.log", "line": 0, "record": "",
                "reason": "weird_code: something"},
               {"source": "fernandez2024", "path": "data/raw/published/f.csv", "line": 2,
                "record": "", "reason": "unit_slip: mfu"}]
    d = _data([], rejects=rejects)
    got = rejected_logs(d, [])
    assert [r["path"] for r in got] == ["data/raw/logs/a/t4.log", "data/raw/logs/x.log"]
    assert "(scalewall validate data/raw/logs/a/t4.log prints every one" in got[0]["fix"]
    assert "scalewall validate data/raw/logs/x.log" in got[1]["fix"]  # unknown code: generic
    assert [r["code"] for r in rejected_logs(d, ["fernandez2024"])] == ["unit_slip"]
    assert set(FIXES) >= {"missing_required", "unknown_accelerator", "conflict",
                          "too_few_steps", "truncated_log", "not_a_run"}


def test_data_table_counts_listed_series_only():
    runs = [_run("a", "logs/a", "log", 8, series_id="logs/a/s1"),
            _run("b", "logs/a", "log", 16, series_id="logs/a/s1"),
            _run("c", "logs/a", "log", 64, series_id="logs/a/s2")]   # alone: not listed
    d = _data(runs, series=["logs/a/s1"])
    (src,) = data_section(d)["sources"]
    assert src["series"] == 1


def test_no_published_alike_without_size_or_family():
    d = _data([_run("p", "pub", "published", 8)])
    assert closest_published_runs(d, None, 8e9, 8) == []
    assert closest_published_runs(d, "H100", None, 8) == []


@pytest.mark.slow
def test_report_shows_single_runs_and_rejects_by_default_and_under_focus(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """A lone Megatron log and a log missing its N, beside a user's sweep and a published
    table, through every stage (``user_logs_chain``): "Your runs" lists the lone run with its
    measures and published runs alike, and the reject with its fix; ``--focus`` on the lone
    run's source shows it too."""
    from user_logs_chain import focused_report, shared_user_chain

    chain = shared_user_chain(tmp_path_factory)
    md = chain.report_md.read_text()
    section = md[md.index("## Your runs"):md.index("## Key findings")]
    assert "Your runs in no scaling series" in section
    # a table wider than the page is printed in the appendix; the section links to it
    tables = md[md.index("## Appendix: tables"):]
    row = next(line for line in (section + tables).splitlines() if line.startswith("| ") and
               "single/train.log" in line)
    assert "| llama3-8b | H100-SXM5-80GB | 64 | 2.6" in row and "alone:" in row
    assert "Closest published runs (same accelerator family, similar model size): " \
           "nvidia_dgxc2024 (" in section
    assert "Your logs that did not become runs" in section
    reject = next(line for line in (section + tables).splitlines() if "broken/esm2.log" in line)
    assert "missing_required: n_accelerators" in reject and "scalewall validate" in reject
    # the Data table agrees: the lone log's source holds no series
    data = md[md.index("## Appendix: data"):]  # its sources table, with the appendix tables
    src_row = next(line for line in data.splitlines() if line.startswith("| logs/single "))
    assert src_row.split("|")[4].strip() == "0" or " 0 |" in src_row

    focused = focused_report(chain, "logs/single", tmp_path / "again")
    focused = focused[focused.index("## Your runs"):focused.index("## Key findings")]
    assert "single/train.log" in focused and "Your runs in no scaling series" in focused


def _fleet(n_campaigns: int) -> ReportData:
    """A fleet's archive: each campaign one series of 3 runs (its largest N growing with its
    number), one lone run, one rejected log; frames as the report reads them."""
    runs, series, rejects = [], [], []
    for c in range(n_campaigns):
        sid = f"logs/c{c:03d}/s"
        for k, n in enumerate((8, 16, 8 * (c + 3))):
            runs.append(_run(f"c{c:03d}-{k}", f"logs/c{c:03d}", "log", n, series_id=sid))
        runs.append(_run(f"c{c:03d}-alone", f"logs/c{c:03d}", "log", 4 + c))
        series.append({"series_id": sid, "source": f"logs/c{c:03d}", "model": "llama3-8b",
                       "accelerator": "H100-SXM5-80GB", "scaling": "strong", "n_min": 8,
                       "n_max": 8 * (c + 3), "n_points": 3})
        rejects.append({"source": f"logs/c{c:03d}", "path": f"data/raw/logs/c{c:03d}/x.log",
                        "line": 0, "record": "",
                        "reason": ("conflict: a" if c % 3 else "too_few_steps: b")})
    d = _data(runs, rejects=rejects)
    d.frames["series"] = pd.DataFrame(series)
    return d


def test_a_fleets_your_runs_details_the_largest_and_counts_the_rest() -> None:
    """Past ``series_shown`` series and ``runs_shown`` runs or rejects, "Your runs" details
    the series reaching the largest N, lists the lone runs of largest N and the first rejects
    by path, and counts every one (rejects by reason code): a fleet's archive stays a section
    to read, and its cost stops growing with the campaigns."""
    from pipeline.report.your_runs import your_runs_section
    d = _fleet(30)
    got = your_runs_section(d, [], series_shown=4, listed_shown=5)
    assert [e["series_id"] for e in got["series"]] == [f"logs/c{c:03d}/s" for c in range(26, 30)]
    assert got["n_series"] == 30 and got["n_runs"] == 120
    assert got["n_singles"] == 30 and [s["run_id"] for s in got["singles"]] == \
        [f"c{c:03d}-alone" for c in range(25, 30)]
    assert got["n_rejected"] == 30
    assert [r["path"] for r in got["rejected"]] == [f"data/raw/logs/c{c:03d}/x.log"
                                                     for c in range(5)]
    assert [(c["code"], c["count"]) for c in got["rejected_by_code"]] == \
        [("conflict", 20), ("too_few_steps", 10)]
    # without caps (callers other than the report stage) every one is detailed
    every = your_runs_section(d, [])
    assert len(every["series"]) == 30 and len(every["singles"]) == len(every["rejected"]) == 30
    # under the caps nothing is left out, and nothing is said about it
    small = your_runs_section(_fleet(3), [], series_shown=4, listed_shown=5)
    assert len(small["series"]) == small["n_series"] == 3 and len(small["singles"]) == 3

    from pipeline.report.render import environment
    for markdown in (False, True):
        env = environment(autoescape=not markdown, markdown=markdown)
        macros = env.get_template("_your_runs.j2").module
        text = str(macros.rejected_intro(got))
        assert "30 in all, by reason: conflict 20" in text and "too_few_steps 10" in text
        assert "The first 5 by path" in text
        assert "5 of 30 listed: those of largest N" in str(macros.singles_intro(got))
        intro = str(env.get_template("_focus.j2").module.intro(got, markdown))
        assert "30 scaling series" in intro and "the 4 reaching the largest N are detailed" in intro
        assert "reaching the largest N" not in str(env.get_template("_focus.j2").module
                                                    .intro(small, markdown))
