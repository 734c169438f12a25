"""What the catalog must hold for the planner to answer: never a null, NaN or inf figure.

Each value the step function needs for a request is checked before the search; a missing one is
a PlanError naming the catalog column and the accelerator (exit status 2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.step import MXFP8_FAMILIES, PEAK_OF
from pipeline.calibrate.topology import Topology
from pipeline.catalog import Catalog
from pipeline.plan.request import PlanError

PRECISIONS = ("bf16", "fp16", "fp8", "mxfp8")
HARDWARE_CSV = "data/catalog/hardware.csv"


def check_precision(catalog: Catalog, accelerator: str, precision: str,
                    field_name: str = "--precision") -> None:
    """The chip has a dense peak at ``precision`` (MXFP8: a Blackwell chip's FP8 peak);
    ``field_name`` is what a refusal names (ACCELERATOR where the precision is the default)."""
    if precision not in PRECISIONS:
        raise PlanError("--precision", f"{precision!r} is not one of {', '.join(PRECISIONS)}")
    family = catalog.family(accelerator)
    if precision == "mxfp8" and family not in MXFP8_FAMILIES:
        raise PlanError("--precision", f"mxfp8 (block-scaled FP8) runs on {', '.join(MXFP8_FAMILIES)}"
                        f" tensor cores; {accelerator} has none: use fp8 or bf16")
    peak, _ = catalog.peak_flops_per_s(accelerator, PEAK_OF.get(precision, precision))
    if peak is None:
        col = f"peak_{PEAK_OF.get(precision, precision)}_flops_per_s"
        raise PlanError(field_name, f"the catalog has no {col} for {accelerator} "
                        f"({HARDWARE_CSV}): {precision} cannot be priced on it")


def check_hardware(catalog: Catalog, topology: Topology, accelerator: str, cluster: str | None,
                   n_max: int, domain: float) -> str | None:
    """The bandwidths and sizes a layout of up to ``n_max`` chips needs (the scale-out
    bandwidth from the cluster, named or the accelerator's default, else the hardware
    catalog); returns the cluster the answer is priced on (None: the hardware catalog's)."""
    if cluster is not None:
        if cluster not in topology.table.index:
            raise PlanError("--cluster", f"{cluster!r} is not in data/catalog/clusters.csv "
                            f"(clusters: {', '.join(topology.table.index)})")
        if topology.table.loc[cluster, "accelerator"] != accelerator:
            raise PlanError("--cluster", f"{cluster} is a cluster of "
                            f"{topology.table.loc[cluster, 'accelerator']}, not {accelerator}")
    priced = cluster or topology.default.get(accelerator)
    spec = catalog.spec(accelerator)
    row = topology.table.loc[priced] if priced is not None else None
    need = ["hbm_bytes", "hbm_bytes_per_s", "scaleup_bytes_per_s"]
    size = (domain if np.isfinite(domain) else float(row["scaleup_domain_size"])
            if row is not None else float(spec.get("scaleup_domain_size") or np.nan))
    if not np.isfinite(size):
        need.append("scaleup_domain_size")
    missing = [c for c in need if spec.get(c) is None]
    out_bw = row["scaleout_bytes_per_s"] if row is not None else spec.get("scaleout_bytes_per_s")
    if n_max > size and out_bw is None:
        missing.append("scaleout_bytes_per_s")
    if missing:
        why = (f" (N = {n_max:,} leaves its {size:g}-chip scale-up domain; no cluster of it in "
               "data/catalog/clusters.csv either)"
               if missing[-1] == "scaleout_bytes_per_s" else "")
        raise PlanError("ACCELERATOR", f"the catalog has no {', '.join(missing)} for "
                        f"{accelerator} ({HARDWARE_CSV}){why}: the step time cannot be computed;"
                        " add the value with its source")
    return priced


def check_finite(rows: pd.DataFrame, accelerator: str) -> None:
    """Every priced figure is finite (a catalog gap the checks above missed is still an exit
    2, never a NaN answer)."""
    cols = ["mfu", "mfu_low", "mfu_high", "step_time_s", "tokens_per_s", "ceiling_mfu",
            "memory_bytes_per_accelerator"]
    bad = [c for c in cols if c in rows and not np.isfinite(rows[c].to_numpy(float)).all()]
    if bad:
        raise PlanError("ACCELERATOR", f"{', '.join(bad)} cannot be computed for {accelerator} "
                        f"from the catalog ({HARDWARE_CSV}): a value it needs is missing")
