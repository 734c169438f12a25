"""MLPerf log parsing speed: ``pipeline.ingest.sources.mlperf.mllog`` against the reference parser.

Parses every result log in ``../shared/traces/mlperf`` (or, when that is absent, ~50 MB of
generated logs shaped like NVIDIA's: per-rank ``init_start`` lines, tracked_stats, noise) with
``mllog.parse_file`` (best of 3) and with ``mlperf_logging``'s ``mlp_parser.parse_file`` (once),
checks both find the same run_start/run_stop times, and prints MB/s, the ratio and peak memory.
Run: ``python -m benchmarks.bench_ingest_mlperf``.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import best_of
from pipeline.ingest.sources.mlperf import mllog
from pipeline.ingest.sources.mlperf.tree import read_tree

SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "mlperf"
TARGET_MB_PER_S = 150.0
TARGET_RATIO = 15.0


def _event(t: int, key: str, value=None, **meta) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME",
                                     "key": key, "value": value,
                                     "metadata": {"file": "<string>", "lineno": 3, **meta}})


def write_synthetic(folder: Path, n_files: int = 31, ranks: int = 8192) -> list[Path]:
    """Logs of realistic shape (about 1.6 MB each, 50 MB in all) under folder/<round>/<submitter>/..."""
    paths = []
    for i in range(n_files):
        t0 = 1_700_000_000_000 + i * 10**7
        lines = [_event(t0 + r // 8, "init_start", rank=r) for r in range(ranks)]
        lines += [_event(t0 + 9000, "global_batch_size", 2048),
                  _event(t0 + 9001, "max_sequence_length", 2048),
                  _event(t0 + 9999, "init_stop"), _event(t0 + 10_000, "run_start")]
        for s in range(300):
            lines.append(f"[NeMo I 2025-01-01 00:00:00 step {s}] loss=2.{s} lr=1e-4 grad_norm=0.9")
            lines.append(_event(t0 + 10_000 + s * 900, "tracked_stats",
                                {"throughput": 2.3e6, "train_step_timing in s": 0.9}, step=s))
        lines.append(_event(t0 + 10_000 + 300 * 900, "run_stop", status="success"))
        path = folder / "v0.0" / "Synth" / "results" / f"sys{i}" / "gpt3" / "result_0.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{i % 8}: {ln}\n" for ln in lines), encoding="latin-1")
        paths.append(path)
        system = folder / "v0.0" / "Synth" / "systems" / f"sys{i}.json"
        system.parent.mkdir(parents=True, exist_ok=True)
        system.write_text(json.dumps({"number_of_nodes": "1024", "accelerators_per_node": "8",
                                      "accelerator_model_name": "NVIDIA H100-SXM5-80GB"}))
    return paths


def _times(events) -> tuple:
    def first(k):
        return next((e for e in events if e.key == k), None)
    return tuple(None if e is None else e.time_ms for e in (first("run_start"), first("run_stop")))


def measure(paths: list[Path]) -> dict[str, float]:
    from mlperf_logging.compliance_checker.mlp_parser import parse_file as ref_parse

    total_mb = sum(p.stat().st_size for p in paths) / 1e6
    ours, best_wall, best_cpu = best_of(lambda: [mllog.parse_file(p) for p in paths])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    w, c = time.perf_counter(), time.process_time()
    ref = [ref_parse(str(p), ruleset="5.0.0")[0] for p in paths]
    ref_wall, ref_cpu = time.perf_counter() - w, time.process_time() - c
    for p, a, b in zip(paths, ours, ref):
        ref_times = tuple(next((ll.timestamp for ll in b if ll.key == k), None)
                          for k in ("run_start", "run_stop"))
        if _times(a.events) != ref_times:
            raise SystemExit(f"parsers disagree on {p}: {_times(a.events)} vs {ref_times}")
    return {"files": len(paths), "MB": total_mb, "ours": total_mb / best_wall,
            "ref": total_mb / ref_wall, "ours_cpu": total_mb / best_cpu,
            "ref_cpu": total_mb / ref_cpu, "peak_mb": peak_mb}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if SHARED_TRACES.is_dir():
            root = SHARED_TRACES
            paths = sorted(SHARED_TRACES.glob("v*/*/results/**/result_*.txt"))
            paths += sorted(SHARED_TRACES.glob("v*/*/results/*/*/power/*/*.txt"))
            label = f"{SHARED_TRACES} (all trace logs)"
        else:
            print(f"mlperf traces absent ({SHARED_TRACES}): using generated logs", file=sys.stderr)
            paths = write_synthetic(Path(tmp))
            root, label = Path(tmp), "generated synthetic logs"
        m = measure(paths)
        tree_s = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            n_records = sum(1 for r in read_tree(root) if r.fields is not None)
            tree_s = min(tree_s, time.perf_counter() - t)
    print(f"mlperf_ingest_input: {m['files']} files, {m['MB']:.2f} MB, {label}")
    print(f"mlperf_ingest_MB_per_s: {m['ours']:.1f} (target >= {TARGET_MB_PER_S:.0f})")
    print(f"mlperf_reference_mlp_parser_MB_per_s: {m['ref']:.1f}")
    print(f"mlperf_ingest_speedup_vs_reference: {m['ours'] / m['ref']:.1f}x "
          f"(target >= {TARGET_RATIO:.0f}x)")
    print(f"mlperf_ingest_MB_per_cpu_s: {m['ours_cpu']:.1f} (reference {m['ref_cpu']:.1f}; "
          f"{m['ours_cpu'] / m['ref_cpu']:.1f}x; CPU time, independent of machine load)")
    print(f"mlperf_read_tree_MB_per_s: {m['MB'] / tree_s:.1f} ({n_records} runs; whole tree "
          "walk: sha1, system JSON, extraction, olympic scores)")
    print(f"mlperf_ingest_peak_rss_MB: {m['peak_mb']:.0f} (target < 1024)")


if __name__ == "__main__":
    main()
