"""What reading step logs through an fsspec URL costs over reading the same local folder.

``SCALEWALL_BENCH_REMOTE_LOGS`` small logs (``scale_data.small_logs``: 30 steps each, a sidecar
per campaign and per job folder) are written to a temporary folder and copied to fsspec's
``memory://`` filesystem; then, in this one process (``ingest.logs.workers`` 1, no pool), the
listing (``reader._log_texts`` plus a size each, against ``RemoteRoot.list``) and the whole
read (``reader.read_logs``, which lists again) of each root, in the order local, URL, URL,
local; each root's cheaper run in CPU-s counts. fsspec's ``MemoryFileSystem.ls`` scans its
whole store on every call, so its listing costs grow with files x folders: an artefact of the
stand-in (an object store lists a prefix with one paginated request per 1,000 keys), shown
apart; "read less its listing" is what the fetching and reading cost. ``memory://`` has no network: the difference is the project's
own per-file cost of a URL root (the listing, the copy of each log and its sidecars into a
scratch folder, the paths renamed to URLs), not an object store's latency.

Run: ``python -m benchmarks.remote_roots`` (not part of ``make bench``).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import fsspec

from benchmarks.scale_data import small_logs
from pipeline.ingest.roots import logs_root
from pipeline.ingest.sources.steplogs import reader

N_LOGS = int(os.environ.get("SCALEWALL_BENCH_REMOTE_LOGS", 4_000))
PARAMS = {"ingest": {"logs": {"warmup_steps": "auto", "max_warmup_fraction": 0.5,
                              "min_steady_steps": 3, "workers": 1}}}


def _cpu_s(fn) -> tuple[float, object]:
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        local = small_logs(N_LOGS, Path(tmp))["logs"]
        fsspec.filesystem("memory").put(str(local), "/bench-logs", recursive=True)
        remote = logs_root("memory://bench-logs", "--logs")
        listed = {"local": lambda: [reader._size(p) for p in reader._log_texts(local)],
                  "memory://": lambda: remote.list(
                      lambda name: reader.is_log_name(name) or reader.is_listed(name))}
        read = {"local": lambda: reader.read_logs(local, PARAMS)[0],
                "memory://": lambda: reader.read_logs(remote, PARAMS)[0]}
        best: dict[str, list[float]] = {}
        for root in ("local", "memory://", "memory://", "local"):
            list_s, _ = _cpu_s(listed[root])
            read_s, records = _cpu_s(read[root])
            runs = sum(r.reason is None for r in records)
            print(f"{root:10s} list {list_s:6.2f} CPU-s, read {read_s:6.2f} CPU-s "
                  f"({len(records)} logs, {runs} runs)", flush=True)
            old = best.get(root)
            best[root] = [list_s, read_s] if old is None or read_s < old[1] else old
    n = N_LOGS
    for root, (list_s, read_s) in best.items():
        print(f"{root:10s} per log: list {1e3 * list_s / n:.3f} CPU-ms, read {1e3 * read_s / n:.3f}"
              f" CPU-ms, read less its listing {1e3 * (read_s - list_s) / n:.3f} CPU-ms")
    (l_list, l_read), (m_list, m_read) = best["local"], best["memory://"]
    extra = (m_read - m_list) - (l_read - l_list)
    print(f"URL root over local, listing aside: {1e3 * extra / n:.3f} CPU-ms a log "
          f"({100 * extra / (l_read - l_list):.0f}% of the local read)")

if __name__ == "__main__":
    main()
