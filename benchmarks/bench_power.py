"""MLPerf power-log parsing speed: ``pipeline.ingest.sources.mlperf.power`` beside the reference.

Reads every shipped power log (``data/raw/mlperf/**/power/result_*/{node,sw}_*.txt.gz``),
decompresses each into memory once, then times the parse of the uncompressed text: ours
(``power.parse_power_bytes``, best of 5) and ``mlperf_logging``'s ``mlp_parser`` (the parser its
result summarizer feeds ``_compute_power_node``; ``parse_generator`` over the same text, once).
Also the whole energy computation as the ingest runs it (gzip included): ``power.measure`` over
every result's power folder. Run: ``python -m benchmarks.bench_power``.
"""

from __future__ import annotations

import gzip
import io
import time
from pathlib import Path

from benchmarks.timing import best_of
from pipeline.ingest.sources.mlperf import mllog, power

ROOT = Path(__file__).resolve().parents[1] / "data" / "raw" / "mlperf"
TARGET_MB_PER_S = 100.0


def main() -> None:
    from mlperf_logging.compliance_checker.mlp_parser.ruleset_400 import parse_generator

    files = sorted(ROOT.glob("v*/*/results/*/*/power/result_*/*.txt.gz"))
    files = [f for f in files if f.name.startswith(("node_", "sw_"))]
    blobs = [gzip.decompress(f.read_bytes()) for f in files]
    mb = sum(len(b) for b in blobs) / 1e6
    ours, best_wall, best_cpu = best_of(lambda: [power.parse_power_bytes(b) for b in blobs])
    texts = [b.decode("latin-1") for b in blobs]
    w, c = time.perf_counter(), time.process_time()
    ref = [parse_generator(io.StringIO(t))[0] for t in texts]
    ref_wall, ref_cpu = time.perf_counter() - w, time.process_time() - c
    n_ours = sum(int((p.kind == 0).sum()) for p in ours)
    n_ref = sum(sum(1 for ll in r if ll.key == "power_reading") for r in ref)
    if n_ours != n_ref:
        raise SystemExit(f"parsers disagree: {n_ours} readings against {n_ref}")
    results = sorted(ROOT.glob("v*/*/results/*/*/result_*.txt.gz"))
    t = time.perf_counter()
    for res in results:
        log = mllog.parse_file(res)
        folder = res.parent / "power" / res.name[: -len(".txt.gz")]
        power.measure(folder, log.first("run_start").time_ms, log.first("run_stop").time_ms,
                      None, (res.parts[-5],))
    measure_s = time.perf_counter() - t
    print(f"power_logs_input: {len(files)} files, {mb:.2f} MB uncompressed, {n_ours} readings")
    print(f"power_parse_MB_per_s: {mb / best_wall:.1f} (target >= {TARGET_MB_PER_S:.0f}; "
          f"{mb / best_cpu:.1f} per CPU-second)")
    print(f"power_reference_mlp_parser_MB_per_s: {mb / ref_wall:.1f} "
          f"({mb / ref_cpu:.1f} per CPU-second)")
    print(f"power_parse_speedup_vs_reference: {ref_wall / best_wall:.1f}x")
    print(f"power_energy_all_results_s: {measure_s:.2f} ({len(results)} results: gunzip, parse, "
          "MLCommons energy, checks)")


if __name__ == "__main__":
    main()
