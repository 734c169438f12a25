"""The bundle's tables, computed from the ingest's outputs and the sources catalog.

* ``release_runs``: the runs of every source listed in ``data/catalog/sources.csv`` that carry a
  citation, with the source's URL and licence and the run's year added; runs of unlisted
  sources (a user's own logs) are left out and counted, never released without terms.
* ``sources_table``: per released source, the catalog row with what the data hold: runs,
  rejects, accelerator families, N range and the columns derived (and on how many runs).
* ``rejects_summary``: per source and reject code, the count and the first example.
"""

from __future__ import annotations

import pandas as pd

from pipeline.release.sources import run_years


def release_runs(runs: pd.DataFrame, sources: pd.DataFrame
                 ) -> tuple[pd.DataFrame, dict[str, int]]:
    """(released runs sorted by ``run_id``, {why left out: runs})."""
    listed = runs["source"].isin(sources.index)
    cited = runs["citation"].fillna("").str.strip() != ""
    excluded = {}
    if (~listed).any():
        excluded["source not in data/catalog/sources.csv"] = int((~listed).sum())
    if (listed & ~cited).any():
        excluded["no citation"] = int((listed & ~cited).sum())
    out = runs[listed & cited].copy()
    out["source_url"] = out["source"].map(sources["url"]).astype("string")
    out["licence"] = out["source"].map(sources["licence"]).astype("string")
    out["year"] = run_years(out, sources).astype("int64")
    return out.sort_values("run_id", kind="mergesort").reset_index(drop=True), excluded


def derived_summary(derived: pd.Series) -> str:
    """``col (runs); ...`` over a source's ``derived`` cells, most frequent first."""
    names = derived.dropna().str.split(";").explode()
    names = names[names.str.len() > 0]
    if names.empty:
        return "nothing derived"
    counts = names.value_counts()
    counts = counts.sort_index(kind="mergesort").sort_values(ascending=False, kind="mergesort")
    return "; ".join(f"{name} ({n})" for name, n in counts.items())


def sources_table(runs: pd.DataFrame, rejects: pd.DataFrame, sources: pd.DataFrame
                  ) -> pd.DataFrame:
    """One row per released source (sorted by id): a citation line (publisher, date, title,
    URL), the catalog columns, then runs, rejects, accelerator families, smallest and largest
    N, and the derived columns."""
    rows = []
    reject_counts = rejects["source"].value_counts()
    for source, group in runs.groupby("source", sort=True):
        meta = sources.loc[source]
        families = sorted(group["accelerator_family"].dropna().unique())
        rows.append({
            "source": source,
            "citation": f"{meta['publisher']} ({meta['published']}). {meta['title']}. "
                        f"{meta['url']}",
            "title": meta["title"], "publisher": meta["publisher"],
            "published": meta["published"], "url": meta["url"], "kind": meta["kind"],
            "licence": meta["licence"], "terms": meta["terms"], "runs": len(group),
            "rejects": int(reject_counts.get(source, 0)),
            "accelerator_families": "; ".join(families),
            "n_min": int(group["n_accelerators"].min()),
            "n_max": int(group["n_accelerators"].max()),
            "derived": derived_summary(group["derived"]),
        })
    return pd.DataFrame(rows)


def rejects_summary(rejects: pd.DataFrame) -> pd.DataFrame:
    """Rejected records per source and reason code, with the first example (path:line)."""
    if rejects.empty:
        return pd.DataFrame(columns=["source", "code", "records", "example", "example_reason"])
    frame = rejects.assign(code=rejects["reason"].str.split(":", n=1).str[0],
                           where=rejects["path"] + ":" + rejects["line"].astype("string"))
    frame = frame.sort_values(["source", "code", "path", "line"], kind="mergesort")
    out = frame.groupby(["source", "code"], sort=True).agg(
        records=("reason", "size"), example=("where", "first"),
        example_reason=("reason", "first")).reset_index()
    out["example_reason"] = out["example_reason"].str.slice(0, 200)
    return out
