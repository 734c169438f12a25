"""Topology as data: the clusters of ``data/catalog/clusters.csv``, each an accelerator's node
(accelerators per node), NVLink domain (scale-up domain) and NICs with their bandwidth per
accelerator, every value with its source (derived ones listed in ``derived``).

A run's row names a ``cluster``; where it names none (or one this file does not list), the
accelerator's default cluster (``default`` = true) gives its topology. Scale-up groups (TP, CP,
EP) that fit in the domain run at NVLink rates; the others leave it and are priced at the
cluster's scale-out bandwidth (``pipeline.calibrate.critical_path.ring_time``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import ConfigError

CLUSTERS_FILE = "clusters.csv"
COLUMNS = ("cluster", "accelerator", "default", "accelerators_per_node", "scaleup_domain_size",
           "nics_per_accelerator", "scaleout_bytes_per_s", "sources", "derived", "notes")
NUMBERS = ("accelerators_per_node", "scaleup_domain_size", "nics_per_accelerator",
           "scaleout_bytes_per_s")


@dataclass(frozen=True)
class Topology:
    """The cluster table (indexed by cluster id) and each accelerator's default cluster."""

    table: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=list(COLUMNS)).set_index("cluster"))
    default: dict[str, str] = field(default_factory=dict)

    def of_rows(self, cluster: np.ndarray, accelerator: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """(the cluster each row is priced on, whether the row named it): its own where this
        file lists it, else its accelerator's default (None where there is none)."""
        named = np.array([isinstance(c, str) and c in self.table.index for c in cluster])
        out = np.array([c if ok else self.default.get(a) for c, a, ok
                        in zip(cluster, accelerator, named)], dtype=object)
        return out, named

    def column(self, clusters: np.ndarray, name: str) -> np.ndarray:
        """``name`` of each row's cluster (NaN where the row has none)."""
        values = self.table[name].to_dict() if name in self.table else {}
        return np.array([values.get(c, np.nan) if isinstance(c, str) else np.nan
                         for c in clusters], dtype=float)


def load_topology(catalog_dir: Path) -> Topology:
    """Read and check clusters.csv (absent: an empty topology, the hardware catalog alone)."""
    path = Path(catalog_dir) / CLUSTERS_FILE
    if not path.exists():
        return Topology()
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"catalog: {CLUSTERS_FILE} lacks column(s) {', '.join(missing)}")
    for i, row in frame.iterrows():
        where = f"catalog: {CLUSTERS_FILE} line {int(i) + 2}"
        if not row["sources"].strip():
            raise ConfigError(f"{where}: empty 'sources'")
        for col in NUMBERS:
            try:
                value = float(row[col])
            except ValueError:
                raise ConfigError(f"{where}: {col}={row[col]!r} is not a number") from None
            if not (np.isfinite(value) and value > 0):
                raise ConfigError(f"{where}: {col}={row[col]!r} must be positive and finite")
        if row["default"] not in ("true", "false"):
            raise ConfigError(f"{where}: default={row['default']!r} is not true or false")
    if frame["cluster"].duplicated().any():
        raise ConfigError(f"catalog: {CLUSTERS_FILE}: cluster ids must be unique")
    defaults = frame[frame["default"] == "true"]
    if defaults["accelerator"].duplicated().any():
        raise ConfigError(f"catalog: {CLUSTERS_FILE}: one default cluster per accelerator")
    table = frame.set_index("cluster")
    for col in NUMBERS:
        table[col] = table[col].astype(float)
    return Topology(table=table, default=dict(zip(defaults["accelerator"], defaults["cluster"])))
