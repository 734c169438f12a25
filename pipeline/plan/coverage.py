"""Where a planned configuration lies against the measured ones, and how far to trust it there.

A family's fitted values (pipeline/calibrate/families.py) apply to the configurations its runs
measured. For a planned row, :func:`outside_reasons` lists each feature its family's fitted
runs never had (ZeRO-3 on the accelerator family, a precision on an accelerator family, an
accelerator family, pp / cp / ep > 1, interleaved pipeline stages (v > 1), a node size, a TP
group larger than the scale-up domain
(its traffic on the scale-out links, which no family's fitted overlap hides), a sequence longer
than any fitted one; an
accelerator family it never ran on is said once, not again for ZeRO-3 and the precision). Such
an answer transfers the family's values to a configuration it never saw; :func:`widen` widens its interval by what the
data say about such a transfer: the spread of the step time between the production families'
fitted values on the same row (the families are different software measured on different
configurations, so their disagreement on this row is the data's own measure of how much a
family's values may move off its measurements), added in quadrature to the conformal
half-width.

:func:`mfu_ceiling` is the highest MFU measured on an accelerator family at a precision, as the
shared plausibility rule (``pipeline.plausibility``) records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline import plausibility
from pipeline.calibrate.step import StepModel, predict, scaleup_domain
from pipeline.frameworks import PRODUCTION_FAMILIES
from pipeline.io_parts import read_frame, read_schema

FEATURE_COLUMNS = ("family", "accelerator_family", "precision", "zero_stage", "pp", "cp", "ep",
                   "virtual_pipeline", "accelerators_per_node", "seq_len", "mfu", "status",
                   "tp_out")

TEXT_COLUMNS = ("precision", "accelerator_family", "family")
# The runs.parquet columns the planner reads (the features above, the MoE record's citation): a
# column read of 22 of its 70 columns, not the whole table
RUN_COLUMNS = ("run_id", "accelerator_family", "precision", "zero_stage", "pp", "cp", "ep",
               "virtual_pipeline", "accelerators_per_node", "seq_len", "mfu", "status",
               "n_experts", "accelerator",
               "source", "citation", "model", "n_accelerators", "model_id", "tp", "cluster",
               "global_batch_tokens")


@dataclass(frozen=True)
class Measured:
    """The runs calibrate fitted (with their family), and every measured run (for the MFU
    ceiling)."""

    fitted: pd.DataFrame
    runs: pd.DataFrame


def load_measured(processed: Path, catalog_hw: pd.DataFrame | None = None) -> Measured:
    """Read runs.parquet and calibrated.parquet (the fitted runs and their family); absent
    files give empty tables (the planner still answers, flagging every row as outside)."""
    runs_path, cal_path = Path(processed) / "runs.parquet", Path(processed) / "calibrated.parquet"
    runs = _read_columns(runs_path, RUN_COLUMNS) if runs_path.exists() else pd.DataFrame()
    if runs.empty or not cal_path.exists():
        return Measured(pd.DataFrame(columns=FEATURE_COLUMNS), runs)
    cal = pd.read_parquet(cal_path, columns=["run_id", "family"])
    fitted = runs.merge(cal, on="run_id", how="inner")
    fitted["precision"] = fitted["precision"].fillna("bf16")
    return Measured(fitted, runs)


def tp_leaves_domain(frame: pd.DataFrame, step: StepModel) -> np.ndarray:
    """Per row, 1.0 where its TP group is larger than its scale-up domain as the step model
    prices it (the row's cluster, else its accelerator's default), else 0.0."""
    if frame.empty or "tp" not in frame:
        return np.zeros(len(frame))
    tp = pd.to_numeric(frame["tp"], errors="coerce").fillna(1.0).to_numpy(float)
    return (tp > scaleup_domain(frame, step)).astype(float)


def with_tp_domain(measured: Measured, step: StepModel) -> Measured:
    """``measured`` with the fitted runs' ``tp_out`` (:func:`tp_leaves_domain`)."""
    fitted = measured.fitted.assign(tp_out=tp_leaves_domain(measured.fitted, step))
    return Measured(fitted, measured.runs)


def _read_columns(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """``columns`` of a parquet table (a file or a folder of parts, ``pipeline.io_parts``),
    those it has (an older runs.parquet may lack one)."""
    have = set(read_schema(path).names)
    return read_frame(path, columns=[c for c in columns if c in have])


def _feature_present(fitted: pd.DataFrame, col: str, test) -> bool:
    return bool(test(_col(fitted, col)).any())


def outside_reasons(row: pd.Series, measured: Measured, acc_family: str) -> list[str]:
    """Features of a planned row its family's fitted runs never had (module docstring)."""
    fam = row["framework_family"]
    own = measured.fitted[measured.fitted["family"] == fam]
    everyone = measured.fitted
    out = []

    def check(name: str, col: str, test) -> bool:
        """Whether the family measured the feature; a reason added where it did not."""
        if _feature_present(own, col, test):
            return True
        others = sorted(set(everyone.loc[test(_col(everyone, col)), "family"]))
        seen = f" ({', '.join(others)} did)" if others else " (no fitted run did)"
        out.append(f"{fam} never measured {name}{seen}")
        return False

    # a family that never ran on the accelerator family never ran ZeRO-3 or a precision there
    # either: that one reason says it, the two it implies are not repeated
    on_chip = check(f"a run on {acc_family}", "accelerator_family", lambda s: s == acc_family)
    if on_chip and row["zero_stage"] >= 3:  # ZeRO-3's gathers ride the chip's interconnect
        check(f"ZeRO-3 on {acc_family}", "zero_stage",
              lambda s: (s >= 3) & (everyone["accelerator_family"].reindex(s.index) == acc_family))
    for axis in ("pp", "cp", "ep"):
        if row[axis] > 1:
            check(f"{axis} > 1", axis, lambda s: s > 1)
    if row["pp"] > 1 and row.get("virtual_pipeline", 1) > 1:  # an interleaved schedule
        check("interleaved stages (v > 1)", "virtual_pipeline", lambda s: s > 1)
    prec = str(row.get("precision") or "bf16")
    if on_chip:
        check(f"{prec} on {acc_family}", "precision",
              lambda s: (s == prec) & (everyone["accelerator_family"].reindex(s.index)
                                       == acc_family))
    if row.get("tp_out", 0.0) > 0:
        check("TP groups larger than the scale-up domain", "tp_out", lambda s: s > 0)
    node = row.get("accelerators_per_node")
    if node is not None and np.isfinite(node) and node != 8:
        check(f"{int(node)} accelerators per scale-up domain", "accelerators_per_node",
              lambda s: s == node)
    longest = pd.to_numeric(own["seq_len"], errors="coerce").max()
    if not (row["seq_len"] <= longest):
        out.append(f"{fam} never measured sequences of {int(row['seq_len']):,} tokens "
                   f"(longest fitted: {longest:,.0f})" if np.isfinite(longest)
                   else f"{fam} has no fitted run")
    return out


# the row's columns :func:`outside_reasons` reads: rows equal in these get the same reasons
REASON_KEYS = ("framework_family", "zero_stage", "pp", "cp", "ep", "virtual_pipeline",
               "precision", "accelerators_per_node", "seq_len", "tp_out")


def outside_reasons_of(rows: pd.DataFrame, measured: Measured, acc_family: str,
                       step: StepModel | None = None) -> list[list[str]]:
    """:func:`outside_reasons` of each row, computed once per distinct ``REASON_KEYS``; with
    ``step``, TP groups are checked against the scale-up domain too."""
    if step is not None:
        rows = rows.assign(tp_out=tp_leaves_domain(rows, step))
        measured = with_tp_domain(measured, step)
    keys = [c for c in REASON_KEYS if c in rows.columns]
    known: dict[tuple, list[str]] = {}
    out = []
    for _, row in rows.iterrows():
        key = tuple(str(row[c]) for c in keys)
        if key not in known:
            known[key] = outside_reasons(row, measured, acc_family)
        out.append(known[key])
    return out


def _col(frame: pd.DataFrame, col: str) -> pd.Series:
    return frame[col] if col in TEXT_COLUMNS else pd.to_numeric(frame[col], errors="coerce")


def family_spread(rows: pd.DataFrame, step: StepModel) -> np.ndarray:
    """Per row: max - min of log step time over the production families' fitted values."""
    logs = []
    for fam in PRODUCTION_FAMILIES:
        if fam in step.theta:
            t = predict(rows.assign(framework_family=fam), step)["step_time_s"].to_numpy(float)
            logs.append(np.log(t))
    if len(logs) < 2:
        return np.zeros(len(rows))
    stack = np.vstack(logs)
    return np.nanmax(stack, axis=0) - np.nanmin(stack, axis=0)


def widen(rows: pd.DataFrame, step: StepModel, outside: np.ndarray) -> pd.DataFrame:
    """Rows with the interval of the outside ones widened: log half-width h -> sqrt(h^2 +
    spread^2) on both ends (module docstring); the fast end stays at or below the ceiling."""
    if not outside.any():
        return rows
    out = rows.copy()
    t = out["step_time_s"].to_numpy(float)
    h = np.log(out["step_time_high_s"].to_numpy(float) / t)
    spread = family_spread(out, step)
    wide = np.where(outside, np.sqrt(h ** 2 + spread ** 2), h)
    ideal = t * out["mfu"].to_numpy(float) / out["ceiling_mfu"].to_numpy(float)
    low = np.maximum(t * np.exp(-wide), ideal)
    high = t * np.exp(wide)
    flop_ratio = out["mfu"].to_numpy(float) * t
    out["step_time_low_s"], out["step_time_high_s"] = low, high
    out["mfu_low"], out["mfu_high"] = flop_ratio / high, flop_ratio / low
    out["interval_widened_by"] = np.where(outside, spread, 0.0)
    return out


def mfu_ceiling(catalog_dir: Path, accelerator: str, precision: str) -> tuple[float, str]:
    """(the highest MFU measured on the family of ``accelerator`` at ``precision``, its
    citation): the shared plausibility rule's record (``pipeline.plausibility``,
    data/catalog/mfu_ceilings.csv); NaN where none is listed."""
    ceiling = plausibility.mfu_ceiling(accelerator, precision, catalog_dir)
    value = float("nan") if ceiling.value is None else float(ceiling.value)
    return value, ceiling.citation


def moe_mfu_record(runs: pd.DataFrame, hardware: pd.DataFrame, accelerator: str,
                   precision: str) -> tuple[float, str]:
    """(the highest MFU measured on a mixture-of-experts run, ``n_experts`` > 1, on the family
    of ``accelerator`` at ``precision``, its source and citation); NaN where the data hold
    none. An MoE model is held to what MoE runs measured: the dense record
    (:func:`mfu_ceiling`) lies far above every MoE run on the same chip."""
    need = {"n_experts", "mfu", "accelerator", "precision", "source", "citation"}
    if runs.empty or not need <= set(runs.columns):
        return float("nan"), ""
    family = hardware["family"].to_dict()
    moe = runs[(pd.to_numeric(runs["n_experts"], errors="coerce") > 1)
               & (runs["precision"].fillna("bf16") == precision)
               & (runs["accelerator"].map(family) == family.get(accelerator))]
    mfu = pd.to_numeric(moe["mfu"], errors="coerce")
    if not mfu.notna().any():
        return float("nan"), ""
    best = moe.loc[mfu.idxmax()]
    return float(mfu.max()), (f"{best['model']} on {int(best['n_accelerators']):,} "
                              f"{best['accelerator']}, MoE, {best['source']}: {best['citation']}")


def _model_runs(runs: pd.DataFrame, model_id: str, precision: str, chip_column: str,
                chip: str) -> pd.DataFrame:
    """The runs of ``model_id`` whose ``chip_column`` (accelerator or its family) is ``chip``,
    at ``precision`` (bf16 where a run states none)."""
    return runs[(runs["model_id"] == model_id) & (runs[chip_column] == chip)
                & (runs["precision"].fillna("bf16") == precision)]


def model_mfu_records(runs: pd.DataFrame, model_id: str, acc_family: str, precision: str
                      ) -> dict[int, tuple[float, str]]:
    """Per N, the highest MFU measured on ``model_id`` on ``acc_family`` at ``precision`` (bf16
    where a run states none), with its source and citation: the top of the measured envelope at
    that scale. The planner issue asks an answer at a scale the data measured for the model to
    agree with that envelope or be flagged as outside it; an answer below the record needs no
    flag (another layout), one above every measured run does. Empty where none is measured."""
    need = {"model_id", "accelerator_family", "precision", "mfu", "n_accelerators", "source",
            "citation", "accelerator"}
    if runs.empty or not need <= set(runs.columns):
        return {}
    mine = _model_runs(runs, model_id, precision, "accelerator_family", acc_family)
    mfu = pd.to_numeric(mine["mfu"], errors="coerce")
    n = pd.to_numeric(mine["n_accelerators"], errors="coerce")
    mine, mfu, n = mine[mfu.notna() & n.notna()], mfu[mfu.notna() & n.notna()], n[mfu.notna()
                                                                                 & n.notna()]
    out = {}
    for count in sorted(set(n.astype(int))):
        at = mfu[n == count]
        best = mine.loc[at.idxmax()]
        out[count] = (float(at.max()), f"{model_id} on {count:,} {best['accelerator']}, "
                                       f"{best['source']}: {best['citation']}")
    return out


def layout_mfu_records(runs: pd.DataFrame, model_id: str, accelerator: str, precision: str
                       ) -> pd.DataFrame:
    """The measured runs of ``model_id`` on exactly ``accelerator`` at ``precision`` (bf16
    where a run states none) that state their layout: N, tp, pp, the global batch in tokens and
    MFU (cp 1 where unstated; ``zero_stage`` NaN where unstated). Empty where there are none."""
    need = {"model_id", "accelerator", "precision", "mfu", "n_accelerators", "tp", "pp",
            "global_batch_tokens", "source", "citation"}
    if runs.empty or not need <= set(runs.columns):
        return pd.DataFrame()
    mine = _model_runs(runs, model_id, precision, "accelerator", accelerator).copy()
    for col in ("mfu", "n_accelerators", "tp", "pp", "global_batch_tokens", "cp", "zero_stage"):
        mine[col] = (pd.to_numeric(mine[col], errors="coerce") if col in mine
                     else np.nan)
    mine["cp"] = mine["cp"].fillna(1.0)
    stated = mine[["mfu", "n_accelerators", "tp", "pp", "global_batch_tokens"]].notna().all(axis=1)
    return mine[stated]


def measured_at_layout(rows: pd.DataFrame, records: pd.DataFrame
                       ) -> tuple[np.ndarray, list[str]]:
    """Per planned row, the median MFU measured at its N, tp, pp, cp and global batch (and ZeRO
    stage, where the run states one) among ``records`` (:func:`layout_mfu_records`), NaN where
    none was; with the runs' source and citation ("" where none)."""
    mfu = np.full(len(rows), np.nan)
    cited = [""] * len(rows)
    if records.empty or rows.empty:
        return mfu, cited
    for i, r in enumerate(rows.itertuples(index=False)):
        at = records[(records["n_accelerators"] == r.n_accelerators) & (records["tp"] == r.tp)
                     & (records["pp"] == r.pp) & (records["cp"] == r.cp)
                     & (np.abs(records["global_batch_tokens"] / float(r.global_batch_tokens)
                               - 1.0) < 1e-6)
                     & (records["zero_stage"].isna() | (records["zero_stage"] == r.zero_stage))]
        if len(at):
            mfu[i] = float(at["mfu"].median())
            first = at.iloc[0]
            more = f" and {len(at) - 1} more" if len(at) > 1 else ""
            cited[i] = f"{first['source']}: {first['citation']}{more}"
    return mfu, cited


def _run_features(fitted: pd.DataFrame) -> list[set[tuple]]:
    """Per fitted run, the features it measured (see :func:`covering_family`)."""
    zero = pd.to_numeric(fitted["zero_stage"], errors="coerce").to_numpy(float)
    pp = pd.to_numeric(fitted["pp"], errors="coerce").to_numpy(float)
    cp = pd.to_numeric(fitted["cp"], errors="coerce").to_numpy(float)
    out = []
    for a, p, z, pipe, ctx in zip(fitted["accelerator_family"], fitted["precision"], zero, pp, cp):
        feats = {("precision@", (p, a))}
        if isinstance(a, str):
            feats.add(("accelerator_family", a))
            if z >= 3:
                feats.add(("zero3@", a))
        feats |= {(name, True) for name, x in (("pp", pipe), ("cp", ctx)) if x >= 2}
        out.append(feats)
    return out


def _covered(runs: list[set[tuple]]) -> set[tuple]:
    """The features a family's fitted runs measured, any of them."""
    return set().union(*runs) if runs else set()


def _features(zero: float, pp: float, cp: float, precision: str, acc_family: str
              ) -> list[tuple]:
    out: list[tuple] = [("accelerator_family", acc_family),
                        ("precision@", (precision, acc_family))]
    if zero >= 3:
        out.append(("zero3@", acc_family))
    if pp > 1:
        out.append(("pp", True))
    if cp > 1:
        out.append(("cp", True))
    return out


def covering_family(rows: pd.DataFrame, measured: Measured, acc_family: str,
                    families: tuple[str, ...], default: str) -> np.ndarray:
    """The planner's default family per row, a stated rule: the production family whose fitted
    runs measured the most of the row's features (ZeRO-3 on its accelerator family, pp > 1,
    cp > 1, its precision on its accelerator family, the accelerator family); on ties
    ``default``, then the family with more fitted runs that measured every one of the
    features the family covers, then more fitted runs. So a ZeRO-3 layout is priced by the
    family whose runs measured ZeRO-3 on that hardware at that precision the most often."""
    fitted = measured.fitted
    counts = fitted["family"].value_counts() if not fitted.empty else pd.Series(dtype=int)
    order = sorted(families, key=lambda f: (f != default, -int(counts.get(f, 0))))
    runs = {f: _run_features(fitted[fitted["family"] == f]) for f in order}
    covered = {f: _covered(runs[f]) for f in order}
    # one choice per distinct (zero_stage, pp, cp, precision), then indexed
    keys = rows[["zero_stage", "pp", "cp", "precision"]]
    distinct = keys.drop_duplicates()
    chosen = []
    for key in distinct.itertuples(index=False):
        feats = _features(float(key[0]), float(key[1]), float(key[2]), str(key[3]), acc_family)
        score = {f: sum(x in covered[f] for x in feats) for f in order}
        mine = {f: {x for x in feats if x in covered[f]} for f in order}
        support = {f: sum(mine[f] <= r for r in runs[f]) for f in order}
        best = max(score.values())
        ties = [f for f in order if score[f] == best]
        # first of the best (order kept): the default, else the most runs at those features
        chosen.append(ties[0] if ties[0] == default else
                      max(ties, key=lambda f: support[f]))
    at = keys.merge(distinct.assign(_choice=np.arange(len(distinct))), how="left",
                    on=list(keys.columns))["_choice"].to_numpy()
    return np.array(chosen + [None], dtype=object)[at] if len(keys) else np.array([], object)
