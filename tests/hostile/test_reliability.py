"""The hostile inputs of ``generators`` by class: each file ends as its exact expected outcome,
and every file a reader considers is accounted for (no crash, no hang, nothing lost).

In process (``validate``'s reading and normalization, which is the ingest's), under an alarm
so that a reader blocking on a FIFO fails the test instead of hanging it; the whole corpus
through ``python -m pipeline ingest`` is the slow test at the end.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generators  # noqa: E402
from generators import Expect  # noqa: E402

from pipeline.config import ConfigError, load_params  # noqa: E402
from pipeline.ingest.validate import validate_logs, validate_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "data" / "catalog"
HANG_S = 120


def _params() -> dict[str, Any]:
    params = load_params(ROOT / "params.yaml")
    params["ingest"]["mlperf_roots"] = []
    return params


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang(f"no answer within {HANG_S} s: a reader blocks")


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("reliability")
    expected = generators.build(root)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        records, runs, rejects, *_ = validate_logs(root / "logs", _params(), CATALOG)
        tables = {rel: validate_table(root / rel, _params(), CATALOG)
                  for cases in expected.values() for rel in cases if rel.startswith("published/")}
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return {"root": root, "expected": expected, "records": records, "runs": runs,
            "rejects": rejects, "tables": tables}


def _rel(path: str, root: Path) -> str:
    return Path(path).resolve().relative_to(root.resolve()).as_posix() if Path(
        path).is_absolute() else path


def _check(expect: Expect, run: dict[str, Any] | None, reject: dict[str, Any] | None,
           where: str) -> list[str]:
    if expect.code is not None:
        if reject is None:
            return [f"{where}: expected reject {expect.code}, got a run"]
        reason = reject["reason"]
        if not reason.startswith(expect.code + ":"):
            return [f"{where}: expected {expect.code}, got {reason[:300]}"]
        return [f"{where}: reason lacks {w!r}: {reason[:400]}" for w in expect.words
                if w not in reason]
    if run is None:
        return [f"{where}: expected a run, got {reject['reason'][:300] if reject else 'nothing'}"]
    wrong = [f"{where}: {k} = {run.get(k)!r}, expected {v!r}" for k, v in expect.run.items()
             if run.get(k) != v]
    return wrong + [f"{where}: notes lack {w!r}: {run.get('notes')}" for w in expect.notes
                    if w not in (run.get("notes") or "")]


def _log_problems(outcome: dict[str, Any], klass: str) -> list[str]:
    root = outcome["root"] / "logs"
    runs = {}
    for row in outcome["runs"]:
        runs[_rel(row["_path"], outcome["root"].parent).split("/", 1)[-1]] = row
    runs = {_rel(r["_path"], root.parent): r for r in outcome["runs"]}
    rejects = {_rel(r["path"], root.parent): r for r in outcome["rejects"]}
    problems = []
    for rel, expect in outcome["expected"][klass].items():
        if rel.startswith("logs/"):
            problems += _check(expect, runs.get(rel), rejects.get(rel), rel)
    return problems


def _table_problems(outcome: dict[str, Any], klass: str) -> list[str]:
    problems = []
    for rel, expects in outcome["expected"][klass].items():
        if not rel.startswith("published/"):
            continue
        runs, rejects, _ = outcome["tables"][rel]
        by_line = {int(r["provenance"].rsplit(":", 1)[1]): r for r in runs}
        rejected = {r["line"]: r for r in rejects}
        if 0 in rejected:  # the whole file (special, binary, unreadable): its one outcome
            rejected[2] = rejected.pop(0)
        if len(runs) + len(rejects) != len(expects):  # accounting: one outcome per data row
            problems.append(f"{rel}: {len(runs)} runs + {len(rejects)} rejects for "
                            f"{len(expects)} rows")
        for line, expect in enumerate(expects, start=2):
            problems += _check(expect, by_line.get(line), rejected.get(line), f"{rel}:{line}")
    return problems


@pytest.mark.parametrize("klass", sorted(generators.GENERATORS))
def test_every_case_ends_as_expected(outcome: dict[str, Any], klass: str) -> None:
    assert _log_problems(outcome, klass) + _table_problems(outcome, klass) == []


def test_every_log_entry_is_one_record(outcome: dict[str, Any]) -> None:
    """Accounting: each log-like entry written (special files included) is exactly one record,
    and every record is a run or a reject."""
    root = outcome["root"]
    written = {rel for cases in outcome["expected"].values() for rel in cases
               if rel.startswith("logs/")}
    seen = [_rel(r.path, root) for r in outcome["records"]]
    assert sorted(seen) == sorted(written)
    assert len(outcome["records"]) == len(outcome["runs"]) + len(outcome["rejects"])


def test_preflight_names_the_special_files(outcome: dict[str, Any]) -> None:
    from pipeline.preflight import find_special
    found = {p.relative_to(outcome["root"]).as_posix(): kind
             for p, kind in find_special([outcome["root"]])}
    expected = {rel: e.words[0].split(" is a ")[1].split(",")[0]
                for rel, e in outcome["expected"]["files"].items()
                if rel.startswith("logs/") and not isinstance(e, list) and " is a " in
                e.words[0] and "directory" not in e.words[0]}
    expected["published/files_fifo.csv"] = "fifo"
    assert found == expected


def test_preflight_stops_the_cli(tmp_path: Path) -> None:
    """The pre-flight check on a project whose input folder holds a FIFO: exit 2, naming it."""
    from pipeline.preflight import problem
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "dvc.yaml").write_text("stages:\n  a:\n    cmd: x\n    deps: [data/raw]\n")
    assert problem(tmp_path) is None
    import os
    os.mkfifo(tmp_path / "data" / "raw" / "pipe.log")
    message = problem(tmp_path)
    assert message is not None and "data/raw/pipe.log (fifo)" in message and "rm PATH" in message


# -- params.yaml ----------------------------------------------------------------------------------
def test_duplicate_params_key_stops_naming_both_lines(tmp_path: Path) -> None:
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    first = text.splitlines().index("ingest:") + 1
    path = tmp_path / "params.yaml"
    path.write_text(text + "ingest:\n  mlperf_roots: []\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"duplicate key 'ingest' at lines {first} and "
                                          f"{len(text.splitlines()) + 1}"):
        load_params(path)
    nested = text.replace("ingest:\n", "ingest:\n  attention_flops: true\n", 1)
    path.write_text(nested, encoding="utf-8")
    with pytest.raises(ConfigError, match="duplicate key 'attention_flops'"):
        load_params(path)


def test_duplicate_params_key_exits_2(tmp_path: Path) -> None:
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    (tmp_path / "params.yaml").write_text(text + "ingest:\n  mlperf_roots: []\n")
    proc = subprocess.run([sys.executable, "-m", "pipeline", "report", "--params",
                           str(tmp_path / "params.yaml"), "--out", str(tmp_path / "r")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "duplicate key 'ingest'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_params_read_as_yaml_1_2_like_dvc() -> None:
    """The project's params.yaml reads the same under 1.1 and 1.2 (no value relies on a 1.1
    coercion), and 1.1-only forms are text or decimal under 1.2, as DVC (ruamel) reads them."""
    from pipeline import yaml12
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    assert yaml12.load(text) == yaml.safe_load(text)
    assert yaml12.load("a: 010\nb: 1:30\nc: yes\nd: off\ne: 0o17\nf: 1e3\ng: ~\n") == {
        "a": 10, "b": "1:30", "c": "yes", "d": "off", "e": 15, "f": 1000.0, "g": None}
    from dvc.utils.serialize import parse_yaml
    assert parse_yaml("a: 010\nb: 1:30\nc: yes\nf: 1e3\n", "x") == {
        "a": 10, "b": "1:30", "c": "yes", "f": 1000.0}

def _report(**fields):
    """A ``report`` settings group with only the fields a check reads."""
    from pipeline.config import ReportSettings

    return ReportSettings.model_construct(**{"strategy_sources": [], "strategy_models": {},
                                             "focus": [], **fields})


def test_focus_naming_nothing_is_a_config_error() -> None:
    from pipeline.report.stage import check_sources

    class Data:
        runs = pd.DataFrame({"source": ["logs/mine"], "series_id": ["s1"]})

    check_sources(_report(strategy_sources=[], focus=["logs/mine", "s1"]), Data())
    with pytest.raises(ConfigError, match=r"report.focus.1.*'logs/mien' is neither a source"):
        check_sources(_report(strategy_sources=[], focus=["s1", "logs/mien"]), Data())
    with pytest.raises(ConfigError, match="report.strategy_models.nope"):
        check_sources(_report(strategy_sources=[], strategy_models={"nope": ["8B"]}), Data())


# -- display --------------------------------------------------------------------------------------
def test_invisible_characters_are_escaped_where_displayed() -> None:
    from pipeline.bounded import cap
    from pipeline.text import escape_invisible, strip_invisible
    assert cap("a\u202eb") == "a{U+202E}b"
    assert escape_invisible("x\u200by\u2066") == "x{U+200B}y{U+2066}"
    assert strip_invisible("H100\u200d") == ("H100", ["U+200D"])


@pytest.mark.slow
def test_whole_corpus_through_the_stage(tmp_path: Path) -> None:
    """``python -m pipeline ingest`` on the corpus: exit 0 within the time limit, bounded
    stderr, read = runs + rejects, each class's files all in the outputs."""
    data = tmp_path / "data"
    expected = generators.build(data)
    params = _params()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "ingest", "--published", str(data / "published"),
         "--logs", str(data / "logs"), "--catalog", str(CATALOG), "--out",
         str(tmp_path / "processed"), "--metrics", str(tmp_path / "ingest.json"), "--params",
         str(tmp_path / "params.yaml")], cwd=ROOT, capture_output=True, text=True,
        timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr) < 5000
    totals = json.loads((tmp_path / "ingest.json").read_text())["totals"]
    assert totals["read"] == totals["runs"] + totals["rejects"]
    runs = pd.read_parquet(tmp_path / "processed" / "runs.parquet")
    rejects = pd.read_parquet(tmp_path / "processed" / "rejects.parquet")
    paths = set(runs["provenance"].str.split(":").str[0]) | set(rejects["path"])
    n_rows = sum(len(e) if isinstance(e, list) else 1 for c in expected.values()
                 for e in c.values())
    assert totals["read"] == n_rows
    for cases in expected.values():
        for rel in cases:
            assert any(p.endswith(rel) for p in paths), rel


def test_validate_names_the_steps_left_out(outcome: dict[str, Any]) -> None:
    from pipeline.ingest.validate import logs_summary
    folder = outcome["root"] / "logs" / "num_negative"
    found = validate_logs(folder, _params(), CATALOG)
    text = logs_summary(folder, *found)
    assert ("note: 20 step(s) with a step time <= 0 or above 1e+06 s left out (20 negative: lines 1, 3,"
            in text)
