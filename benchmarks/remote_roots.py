"""What reading step logs through an fsspec URL costs over reading the same local folder.

``SCALEWALL_BENCH_REMOTE_LOGS`` small logs (``scale_data.small_logs``: 30 steps each, a sidecar
per campaign and per job folder) are written to a temporary folder and copied to fsspec's
``memory://`` filesystem; then, in this one process (``ingest.logs.workers`` 1, no pool), the
listing (``reader._log_texts`` plus a size each, against ``RemoteRoot.list``) and the whole
read (``reader.read_logs``; the URL root's without its listing, answered from one listing made
first) of each root, in the order local, URL, URL, local; each root's cheaper read in CPU-s
counts. fsspec's ``MemoryFileSystem.ls`` scans its whole store on every call, so its listing
costs grow with files x folders: an artefact of the stand-in (an object store lists a prefix
with one paginated request per 1,000 keys), shown apart from the read, which is what fetching
each batch into a scratch folder and reading it there cost. ``memory://`` has no network: the difference is the project's
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
    is_listed = lambda name: reader.is_log_name(name) or reader.is_listed(name)  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        local = small_logs(N_LOGS, Path(tmp))["logs"]
        fsspec.filesystem("memory").put(str(local), "/bench-logs", recursive=True)
        remote = logs_root("memory://bench-logs", "--logs")
        list_s = {"local": min(_cpu_s(lambda: [reader._size(p) for p in
                                               reader._log_texts(local)])[0] for _ in "ab"),
                  "memory://": min(_cpu_s(lambda: remote.list(is_listed))[0] for _ in "ab")}
        # The URL root's read without its listing (timed above): ``list`` answered from one
        # listing made now, so the read times the fetching and the reading alone.
        listed_once = remote.list(is_listed)
        object.__setattr__(remote, "list", lambda listed: listed_once)
        read = {"local": lambda: reader.read_logs(local, PARAMS)[0],
                "memory://": lambda: reader.read_logs(remote, PARAMS)[0]}
        read_s: dict[str, float] = {}
        for root in ("local", "memory://", "memory://", "local"):
            cpu_s, records = _cpu_s(read[root])
            runs = sum(r.reason is None for r in records)
            print(f"{root:10s} read {cpu_s:6.2f} CPU-s ({len(records)} logs, {runs} runs)",
                  flush=True)
            read_s[root] = min(cpu_s, read_s.get(root, cpu_s))
    n = N_LOGS
    for root in read_s:
        print(f"{root:10s} per log: list {1e3 * list_s[root] / n:.3f} CPU-ms, read "
              f"{1e3 * read_s[root] / n:.3f} CPU-ms")
    extra = read_s["memory://"] - read_s["local"]
    print(f"URL root over local, listing aside: {1e3 * extra / n:.3f} CPU-ms a log "
          f"({100 * extra / read_s['local']:.0f}% of the local read)")

if __name__ == "__main__":
    main()
