"""Generated inputs for the scale benchmark: k copies of the shipped data, and many small logs.

Nothing here is committed: the data go to a folder the caller names (a temporary folder, or
``SCALEWALL_BENCH_DIR``), with a ``params.yaml`` that points the ingest at them.

- ``copy_shipped(k, root)``: every published table of ``data/raw/published`` and every MLPerf
  result tree of ``data/raw/mlperf``, each written ``k`` times. Copy ``i > 0`` of a table gets the
  source id ``<source>-x<i>`` (and its series ids the same prefix), in its own file
  ``<stem>-x<i>.csv``; copy ``i`` of an MLPerf tree goes under the submitter folder
  ``<submitter>-x<i>``, so its runs are another submitter's. Each copy is thus a distinct
  publication with the same values: k times the runs, series, fits and candidates.
- ``small_logs(n, root)``: ``n`` step logs of ~30 steps each (the formats of
  ``benchmarks.bench_steplogs`` in turn), in campaigns of eight job folders (N = 8 ... 1024),
  each folder with a ``run.yaml`` giving N, each campaign with one giving the hardware and model:
  the layout of a fleet's job archive.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import shutil
from pathlib import Path

import yaml

from benchmarks.bench_steplogs import WRITERS
from pipeline.config import PROJ_ROOT

PUBLISHED = PROJ_ROOT / "data/raw/published"
MLPERF = PROJ_ROOT / "data/raw/mlperf"
STEPS_PER_LOG = 30
JOB_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)


def _copy_table(src: Path, dest_dir: Path, copy: int) -> None:
    """One published table as copy ``copy`` (0: unchanged)."""
    if copy == 0:
        shutil.copyfile(src, dest_dir / src.name)
        return
    text = src.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    col = {name: header.index(name) for name in ("source", "series", "log_sha1")
           if name in header}
    for row in rows[1:]:
        if "log_sha1" in col and len(row) > col["log_sha1"] and row[col["log_sha1"]]:
            # The ingest takes one log file in two sources for one run: a copy's log is another.
            row[col["log_sha1"]] = _copy_sha1(row[col["log_sha1"]], copy)
        source = row[col["source"]] if "source" in col and len(row) > col["source"] else ""
        if not source:
            continue
        row[col["source"]] = f"{source}-x{copy}"
        if "series" in col and row[col["series"]].startswith(source):
            row[col["series"]] = f"{source}-x{copy}" + row[col["series"]][len(source):]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    (dest_dir / f"{src.stem}-x{copy}.csv").write_text(out.getvalue(), encoding="utf-8")


def _copy_sha1(digest: str, copy: int) -> str:
    return hashlib.sha1(f"{digest}-x{copy}".encode()).hexdigest()


def _copy_mlperf(root: Path, copy: int) -> None:
    """The MLPerf trees, submitter folders renamed ``<submitter>-x<copy>`` (0: unchanged).

    Each result log of a copy starts with one more line (not an MLLOG line, so read as other
    output): the ingest knows a log by its content hash, and a copy must be another log."""
    for round_dir in sorted(p for p in MLPERF.iterdir() if p.is_dir()):
        for submitter in sorted(p for p in round_dir.iterdir() if p.is_dir()):
            name = submitter.name if copy == 0 else f"{submitter.name}-x{copy}"
            dest = root / round_dir.name / name
            shutil.copytree(submitter, dest)
            if copy == 0:
                continue
            for result in sorted(dest.rglob("result_*.txt.gz")):
                body = gzip.decompress(result.read_bytes())
                result.write_bytes(gzip.compress(f"scale benchmark copy {copy}\n".encode() + body,
                                                 mtime=0))


def write_params(root: Path, mlperf_root: Path | None, own_sources: bool = False) -> Path:
    """``root/params.yaml``: the project's, with the MLPerf roots pointed at ``mlperf_root``;
    with ``own_sources`` (data that hold none of the shipped sources) the report names none of
    them, as a user's own params would."""
    params = yaml.safe_load((PROJ_ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["ingest"]["mlperf_roots"] = [] if mlperf_root is None else [str(mlperf_root)]
    if own_sources:
        params["report"].update(strategy_sources=[], strategy_models={}, focus=[])
    params["ingest"]["allow_mlperf_roots_outside_project"] = True
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def copy_shipped(k: int, root: Path) -> dict[str, Path]:
    """k copies of the shipped data under ``root``; the paths a pipeline run needs."""
    published, logs, mlperf = root / "published", root / "logs", root / "mlperf"
    for folder in (published, logs, mlperf):
        folder.mkdir(parents=True, exist_ok=True)
    for copy in range(k):
        for table in sorted(PUBLISHED.glob("*.csv")):
            _copy_table(table, published, copy)
        _copy_mlperf(mlperf, copy)
    return {"published": published, "logs": logs, "params": write_params(root, mlperf)}


def small_logs(n: int, root: Path, layout: bool = False) -> dict[str, Path]:
    """``n`` small step logs under ``root/logs`` (no published tables, no MLPerf trees). With
    ``layout`` each campaign's sidecar also states tp 2 and pp 1, so the runs whose logs give
    an MFU are fitted by calibrate: a fleet of ``n / 8`` campaigns, each its own source."""
    published, logs = root / "published", root / "logs"
    published.mkdir(parents=True, exist_ok=True)
    writers = list(WRITERS.items())
    for i in range(n):
        campaign, job = divmod(i, len(JOB_SIZES))
        name, line = writers[campaign % len(writers)]
        camp_dir = logs / f"campaign{campaign:05d}"
        folder = camp_dir / f"n{JOB_SIZES[job]}"
        folder.mkdir(parents=True, exist_ok=True)
        if job == 0:
            (camp_dir / "run.yaml").write_text(
                "accelerator: H100-SXM5-80GB\nseq_len: 4096\nmodel: llama3-8b\n"
                f"system: cluster-{campaign % 7}\n" + ("tp: 2\npp: 1\n" if layout else ""),
                encoding="utf-8")
        (folder / "run.yaml").write_text(f"n_accelerators: {JOB_SIZES[job]}\n",
                                         encoding="utf-8")
        body = "".join(line(s) for s in range(1, STEPS_PER_LOG + 1))
        (folder / name).write_text(body, encoding="utf-8")
    return {"published": published, "logs": logs,
            "params": write_params(root, None, own_sources=True)}
