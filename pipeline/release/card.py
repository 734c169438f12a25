"""``DATA_CARD.md``: the bundle's data card (after Hugging Face dataset cards and Gebru et al.'s
"Datasheets for Datasets", arXiv:1803.09010): motivation, composition with the coverage tables
and figure, collection and transcription, known biases, uses, loading, citation, maintenance.

Every count in it is computed from the released frames; the prose around them is fixed text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.coverage import N_BIN_LABELS

CITE_AS = """@misc{scalewall_runs,
  title  = {scalewall: measured training runs of large models against data-movement limits},
  author = {{scalewall contributors}},
  note   = {Dataset version %s},
  year   = {%s}
}"""


def _md_table(frame: pd.DataFrame) -> str:
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, (int,)) or (hasattr(value, "dtype") and str(getattr(value, "dtype"))
                                      .startswith("int")):
        return f"{int(value):,}"
    return str(value).replace("|", "/")


def coverage_tables(by_family: pd.DataFrame, by_source: pd.DataFrame) -> str:
    """The two coverage tables: family x N range (runs, sources), and source x family."""
    fam = by_family.reset_index()
    shown = pd.DataFrame({"accelerator family": fam["accelerator_family"]})
    for label in N_BIN_LABELS:
        shown[f"N {label}"] = [f"{r:,} ({s})" if r else "-" for r, s in
                               zip(fam[label], fam[f"{label} sources"])]
    src = by_source.copy()
    src["N range"] = [f"{a:,}-{b:,}" if a != b else f"{a:,}"
                      for a, b in zip(src["n_min"], src["n_max"])]
    src["years"] = [f"{a}" if a == b else f"{a}-{b}"
                    for a, b in zip(src["year_min"], src["year_max"])]
    src = src[["source", "accelerator_family", "runs", "N range", "years", *N_BIN_LABELS]]
    return ("Runs (distinct sources) per accelerator family and job size N:\n\n"
            + _md_table(shown) + "\n\nPer source and accelerator family:\n\n"
            + _md_table(src))


def biases(runs: pd.DataFrame) -> str:
    """Known biases, each with its share computed from the runs."""
    n = len(runs)
    by_source = runs["source"].value_counts()

    def share(source: str) -> str:
        k = int(by_source.get(source, 0))
        return f"{k:,} runs ({k / n:.0%})" if n else "0 runs"

    mlperf = runs[runs["source_kind"].eq("published") & runs["source"].eq("mlperf_training")]
    no_layout = int((mlperf["dp"].isna() & mlperf["tp"].isna()).sum())
    single = int((runs["n_accelerators"] <= 8).sum())
    derived_mfu = int(runs["derived"].fillna("").str.split(";").apply(lambda d: "mfu" in d)
                      .sum())
    own = runs.get("mfu_source_count", pd.Series(np.nan, index=runs.index)).notna()
    recounted = int((own & runs["tokens_per_s"].notna() & runs["derived"].fillna("")
                     .str.split(";").apply(lambda d: "mfu" in d)).sum())
    failed = int((runs["status"] != "ok").sum())
    return "\n".join([
        f"- **Two layout sweeps dominate the counts.** The Ultra-Scale Playbook's sweep (one "
        f"team, one H100 cluster, nanotron) is {share('ultrascale_playbook2025')}, vTrain's "
        f"Megatron-DeepSpeed sweep (A100, mostly one node) {share('vtrain2024')}. Weight by "
        "source, not by run, when a finding should hold across labs.",
        f"- **MLPerf runs state no layout.** {no_layout:,} of {len(mlperf):,} MLPerf Training "
        "runs have no data/tensor parallel degrees: their results give time to train, not the "
        "configuration.",
        f"- **Small jobs are over-represented.** {single:,} runs ({single / max(n, 1):.0%}) use "
        "8 accelerators or fewer; few sources publish runs past 4,096 accelerators.",
        f"- **Derived measures.** MFU is computed by the pipeline (not printed by the source) "
        f"on {derived_mfu:,} runs; every such value is named in the run's `derived` column.",
        "- **One MFU convention.** `mfu` is model FLOP on the project's count (6 N_act per "
        "token plus 12 L d T attention where the shape is known; recompute not counted) over "
        "N x the dense peak at the run's precision. Sources count FLOP their own way (NVIDIA's "
        "tables at 0.76-1.07 of this count), so wherever a run gives tokens/s its MFU is "
        f"recounted from them ({recounted:,} runs) and the source's own figure is kept in "
        "`mfu_source_count`. Runs without tokens/s, or whose precision the source leaves "
        "unstated on a chip with fp8 units (the Ultra-Scale Playbook), carry the MFU as "
        "printed (a note says so).",
        f"- **Failed configurations are kept.** {failed:,} runs have a status other than `ok` "
        "(out of memory, errors) and no throughput: filter on `status == 'ok'` for rates.",
        "- **Publication bias.** Labs publish their good runs; vendor documents (NVIDIA, "
        "Google) are tuned recipes. Measured efficiency is an upper range of what a typical "
        "team reaches.",
    ])
