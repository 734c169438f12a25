"""Measured hardware efficiencies: GEMM rate and collective bandwidth/latency, from the cited
microbenchmarks in ``data/catalog/gemm_efficiency.csv`` and ``data/catalog/collectives.csv``
(README there names every source).

What is derived here, and how (docs/theory.md §11.2):

- **GEMM efficiency against size.** The catalog gives each chip's largest measured fraction of
  peak (``max_gemm_efficiency``, Bekman's maximum-achievable-matmul table). A GEMM of m x k x n
  then takes max(2mkn / (eta_max F), w (mk + kn + mn) / M, launch): the measured rate where the
  arithmetic dominates, the HBM roofline of its own operands where it does not, and never less
  than one kernel launch. Efficiency = 2mkn / F / time.
- **Wave quantization.** The measured rate holds when the output tiles keep every SM busy
  (MAMF's best shapes do). A GEMM whose m x n output splits into T tiles of ``GEMM_TILE``
  (NVIDIA, *Matrix Multiplication Background User's Guide*, "Dimension Quantization Effects")
  with T below the chip's SM count keeps only T SMs busy: its compute-bound rate is the measured
  one times T / SMs (the better of the tile's two orientations). Above one wave the partial
  last wave is not charged: stream-K decomposition (Osama et al. 2023, arXiv:2301.03598; in
  CUTLASS and cuBLAS on Hopper) spreads the tiles' K-loops evenly over the SMs. So skinny GEMMs
  (high TP on a narrow model: a 4096-token microbatch times 4d / tp = 256 columns is 32 tiles
  on 132 SMs) run at a fraction of the measured rate, wide ones at it. The SM count is
  ``sm_count`` of gemm_efficiency.csv (empty: no wave quantization).
- **Collectives: the alpha-beta ring model.** A ring collective over ``p`` ranks, ``p_in`` per
  scale-up domain, takes k (p - 1) alpha for its p - 1 steps (k = 2 for all-reduce) plus its
  bytes: (p_in - 1)/p_in of them per rank over the scale-up link and (p_out - 1)/p_out of 1/p_in
  of them over the scale-out link. The scale-up efficiency is the one-node bus bandwidth over
  the catalog's per-direction link rate; a cluster's multi-node sweep gives its scale-out
  efficiency and its alpha per step by least squares (``_ring_fit``): the Playbook's H100
  cluster loses bus bandwidth with node count at 256 MB because its ring has more steps, which
  a latency of tens of microseconds per step reproduces.
- **Latency of the default network.** The measured 8-byte all-reduce on 2 x 8 H100 gives
  alpha = t / (2 (p - 1)). No intra-node small-message figure is shipped, so alpha inside
  the domain is ``theory.latency.scaleup_latency_s`` and a kernel launch
  ``theory.latency.kernel_latency_s`` (the project's one home for those constants).

A cluster with its own measurements (``hf_playbook``: the Playbook's H100 cluster, whose
scale-out bandwidth falls with node count) is used for the runs whose ``cluster`` column names
it (the Playbook's tables do); every other run uses the ``default`` network: scale-up and scale-out efficiencies from the measured figures (the best
per collective), the latency per step from the small-message all-reduce. That is an
assumption (derived) for every production cluster.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import ConfigError

GEMM_FILE = "gemm_efficiency.csv"
# Output tile of the large-GEMM kernels: 256 x 128, the tile of the NVIDIA guide's worked
# examples (Matrix Multiplication Background User's Guide, "Dimension Quantization Effects")
# and of CUTLASS's default Hopper/Ampere BF16 configurations.
GEMM_TILE = (256.0, 128.0)
COLLECTIVES_FILE = "collectives.csv"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
DEFAULT_CLUSTER = "default"
# Collectives without their own measurement take another's efficiency (derived): all-to-all
# moves (p-1)/p of its bytes like an all-gather; p2p inside a node where no p2p row exists,
# like an all-gather's per-link traffic.
_STAND_IN = {"all_to_all": "all_gather", "reduce_scatter": "all_gather",
             "all_gather": "reduce_scatter", "p2p": "all_gather", "all_reduce": "all_gather"}


def _read(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    if not path.exists():
        raise ConfigError(f"catalog: {path} is missing")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ConfigError(f"catalog: {path.name} lacks column(s) {', '.join(missing)}")
    if (frame["sources"].str.strip() == "").any():
        line = int(np.nonzero((frame["sources"].str.strip() == "").to_numpy())[0][0]) + 2
        raise ConfigError(f"catalog: {path.name} line {line}: empty 'sources'")
    return frame


def _number(frame: pd.DataFrame, column: str, path: str, *, required: bool) -> np.ndarray:
    raw = frame[column].str.strip()
    values = pd.to_numeric(raw.where(raw != ""), errors="coerce").to_numpy(float)
    bad = (raw != "") & ~np.isfinite(values) | np.isfinite(values) & (values <= 0)
    if required:
        bad |= raw == ""
    if bad.any():
        line = int(np.nonzero(bad.to_numpy() if hasattr(bad, "to_numpy") else bad)[0][0]) + 2
        raise ConfigError(f"catalog: {path} line {line}: column '{column}' must be a positive "
                          f"number, got {frame[column].iloc[line - 2]!r}")
    return values


@dataclass(frozen=True)
class Network:
    """Per cluster and collective: scale-up efficiency, and scale-out efficiency against nodes."""

    up: dict[tuple[str, str], float]
    out_nodes: dict[tuple[str, str], np.ndarray]
    out_eff: dict[tuple[str, str], np.ndarray]
    alpha_out_s: float
    clusters: tuple[str, ...] = field(default=(DEFAULT_CLUSTER,))
    #: per cluster: latency per ring step over scale-out (alpha of the alpha-beta ring model)
    hop_s: dict[str, float] = field(default_factory=dict)
    #: per chip and collective: the best one-node measurement of that chip on any cluster
    chip_up: dict[tuple[str, str], float] = field(default_factory=dict)

    def hop_latency(self, cluster: str) -> float:
        return self.hop_s.get(cluster, self.hop_s.get(DEFAULT_CLUSTER, self.alpha_out_s))

    def up_efficiency(self, cluster: str, collective: str, accelerator: str | None = None
                      ) -> float:
        """The cluster's own one-node figure; else the chip's own (a chip measured on another
        cluster: its switch, e.g. whether it reduces in-network, is the chip generation's);
        else the default network's."""
        key = (cluster, collective)
        if key in self.up and cluster != DEFAULT_CLUSTER:
            return self.up[key]
        if (accelerator, collective) in self.chip_up:
            return self.chip_up[(accelerator, collective)]
        if key in self.up:
            return self.up[key]
        if cluster != DEFAULT_CLUSTER:
            return self.up_efficiency(DEFAULT_CLUSTER, collective, accelerator)
        return self.up[(DEFAULT_CLUSTER, _STAND_IN[collective])]

    def out_efficiency(self, cluster: str, collective: str, nodes: np.ndarray) -> np.ndarray:
        """Scale-out link efficiency (the same at any node count: the ring's latency term
        carries the decline with scale)."""
        key = (cluster, collective)
        if key not in self.out_eff:
            if cluster != DEFAULT_CLUSTER:
                return self.out_efficiency(DEFAULT_CLUSTER, collective, nodes)
            key = (DEFAULT_CLUSTER, _STAND_IN[collective])
        return np.full(np.shape(nodes), float(self.out_eff[key][0]))


@functools.lru_cache(maxsize=1)
def _nnls_kernel():
    """scipy's compiled Lawson-Hanson NNLS (``scipy/optimize/_slsqplib``, the routine behind
    ``scipy.optimize.nnls``), loaded from its file without importing the ``scipy.optimize``
    package, whose ``__init__`` imports all of scipy.optimize (~0.3 s of a planner call, for
    one tiny fit). None where this scipy has no such file (then :func:`nnls` imports the
    public function). The same compiled code, so the same bits: a numpy re-implementation
    agreed to 1e-15 but moved calibrate's fitted values at 1e-7 (its optimiser's path)."""
    import importlib.machinery
    import importlib.util

    import scipy
    found = sorted((Path(scipy.__file__).parent / "optimize").glob("_slsqplib.*"))
    if not found:
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader("scipy.optimize._slsqplib",
                                                         str(found[0]))
        spec = importlib.util.spec_from_loader(loader.name, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module.nnls
    except (ImportError, AttributeError):
        return None


def nnls(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """argmin ||a x - b|| subject to x >= 0, and the residual norm: Lawson & Hanson, *Solving
    Least Squares Problems* (1974), ch. 23, as ``scipy.optimize.nnls`` (scipy 1.16, pinned in
    constraints.txt) computes it, argument checks and the 3 n iteration limit included, through
    :func:`_nnls_kernel`. tests/test_plan_speed.py checks it bit for bit against scipy."""
    kernel = _nnls_kernel()
    if kernel is None:
        from scipy.optimize import nnls as public
        return public(a, b)
    a = np.asarray_chkfinite(a, dtype=np.float64, order="C")
    b = np.asarray_chkfinite(b, dtype=np.float64)
    x, rnorm, info = kernel(a, b, 3 * a.shape[1])
    if info == 3:
        raise RuntimeError("nnls: maximum number of iterations reached")
    return x, float(rnorm)


def _ring_fit(points: list[tuple[str, float, float, float, float, float, float]],
              alpha: float | None = None) -> tuple[float, dict[str, float]]:
    """Fit one cluster's multi-node nccl-tests points with the alpha-beta ring model.

    A ring collective over p ranks takes t = k (p - 1) alpha + f(p_in) S / (e_up B_up)
    + f(p_out) S / p_in / (e_out B_out) (Thakur, Rabenseifner & Gropp 2005; k = 2 for
    all-reduce, 1 otherwise; f = k (p-1)/p; hierarchical split of the bytes as in
    :func:`pipeline.calibrate.critical_path.ring_time`). With t from the bus bandwidth
    (t = S f(p) / busbw) this is linear in alpha and 1/e_out; one alpha per cluster and one
    e_out per collective are solved by non-negative least squares. Returns (alpha, e_out by
    collective, capped at 1). With ``alpha`` given, only the efficiencies are solved."""
    colls = sorted({pt[0] for pt in points})
    a, b = [], []
    for coll, p, p_in, size, bus, e_up, (up_bw, out_bw) in (
            (q[0], q[1], q[2], q[3], q[4], q[5], q[6]) for q in points):
        k = 2.0 if coll == "all_reduce" else 1.0
        p_out = p / p_in
        t = k * (p - 1.0) / p * size / bus
        t_up = k * (p_in - 1.0) / p_in * size / (e_up * up_bw)
        row = np.zeros(1 + len(colls))
        row[0] = k * (p - 1.0)
        row[1 + colls.index(coll)] = k * (p_out - 1.0) / p_out * size / p_in / out_bw
        a.append(row)
        b.append(t - t_up)
    a, b = np.array(a), np.array(b)
    if alpha is None:
        x, _ = nnls(a, b)
    else:
        x, _ = nnls(a[:, 1:], b - a[:, 0] * alpha)
        x = np.r_[alpha, x]
    eff = {c: float(min(1.0, 1.0 / x[1 + i])) if x[1 + i] > 0 else 1.0
           for i, c in enumerate(colls)}
    return float(x[0]), eff


def _scale_out(rows: pd.DataFrame, hardware: pd.DataFrame, up: dict[tuple[str, str], float]
               ) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, float]]:
    """(scale-out efficiency by (cluster, collective), latency per ring step s by cluster): the
    alpha-beta ring model fitted to each cluster's multi-node sweeps (at least two node counts),
    and the default network's link efficiency at the fewest nodes measured."""
    by_cluster: dict[str, list] = {}
    for row in rows.itertuples(index=False):
        spec = hardware.loc[row.accelerator]
        out_bw = pd.to_numeric(spec["scaleout_bytes_per_s"], errors="coerce")
        if not (np.isfinite(row.bus) and row.n > row.per_node and row.size > 1024
                and np.isfinite(out_bw)):
            continue
        e_up = up.get((row.cluster, row.collective), 1.0)
        by_cluster.setdefault(row.cluster, []).append(
            (row.collective, row.n, row.per_node, row.size, float(row.bus), e_up,
             (float(spec["scaleup_bytes_per_s"]), float(out_bw))))
    out_eff: dict[tuple[str, str], np.ndarray] = {}
    hop: dict[str, float] = {}
    for cluster, points in sorted(by_cluster.items()):
        if len({pt[1] for pt in points}) < 2:
            continue  # one node count cannot separate latency from bandwidth
        alpha, eff = _ring_fit(points)
        hop[cluster] = alpha
        for coll, e in eff.items():
            out_eff[(cluster, coll)] = np.array([e])
        # the default network: the link efficiency at the fewest nodes measured, read with no
        # latency (an upper bound on the link; production fabrics are assumed not to congest)
        for coll in {pt[0] for pt in points}:
            first = min((pt for pt in points if pt[0] == coll), key=lambda pt: pt[1])
            _, e2 = _ring_fit([first], alpha=0.0)
            key = (DEFAULT_CLUSTER, coll)
            best = float(out_eff[key][0]) if key in out_eff else 0.0
            out_eff[key] = np.array([max(best, e2[coll])])
    return out_eff, hop


def load_network(catalog_dir: Path, hardware: pd.DataFrame) -> Network:
    """The collectives table turned into per-tier efficiencies and latencies (module
    docstring): one-node bus bandwidth over the per-direction link rate (scale-up
    efficiency); multi-node sweeps fitted with the alpha-beta ring model (scale-out
    efficiency and the latency per ring step); an 8-byte multi-node all-reduce gives the
    per-step latency 2 (p - 1) alpha = t of the default network."""
    path = Path(catalog_dir) / COLLECTIVES_FILE
    frame = _read(path, ("cluster", "accelerator", "collective", "n_accelerators",
                         "accelerators_per_node", "message_bytes", "bus_bytes_per_s", "time_s",
                         "sources", "derived", "notes"))
    unknown = sorted(set(frame["collective"]) - set(COLLECTIVES))
    if unknown:
        raise ConfigError(f"catalog: {path.name}: unknown collective(s) {', '.join(unknown)} "
                          f"(known: {', '.join(COLLECTIVES)})")
    missing = sorted(set(frame["accelerator"]) - set(hardware.index))
    if missing:
        raise ConfigError(f"catalog: {path.name}: accelerator(s) {', '.join(missing)} not in "
                          f"hardware.csv")
    rows = frame.assign(
        n=_number(frame, "n_accelerators", path.name, required=True),
        per_node=_number(frame, "accelerators_per_node", path.name, required=True),
        size=_number(frame, "message_bytes", path.name, required=True),
        bus=_number(frame, "bus_bytes_per_s", path.name, required=False),
        time_s=_number(frame, "time_s", path.name, required=False))
    up: dict[tuple[str, str], float] = {}
    chip_up: dict[tuple[str, str], float] = {}
    up_size: dict[tuple[str, str], float] = {}
    up_chip: dict[tuple[str, str], str] = {}
    small_hops = []
    for row in rows.itertuples(index=False):
        spec = hardware.loc[row.accelerator]
        if row.size <= 1024 and np.isfinite(row.time_s) and row.n > row.per_node:
            k = 2.0 if row.collective == "all_reduce" else 1.0
            small_hops.append(float(row.time_s) / (k * (row.n - 1.0)))
        elif (np.isfinite(row.bus) and row.n <= row.per_node
              and row.size >= up_size.get((row.cluster, row.collective), 0.0)):
            # the largest message measured: the link's rate, the latency ramp left behind
            up_size[(row.cluster, row.collective)] = float(row.size)
            up_chip[(row.cluster, row.collective)] = row.accelerator
            up[(row.cluster, row.collective)] = min(1.0, float(row.bus)
                                                    / float(spec["scaleup_bytes_per_s"]))
    for (cluster, coll), value in up.items():
        key = (up_chip[(cluster, coll)], coll)
        chip_up[key] = max(chip_up.get(key, 0.0), value)
    out_eff, hop = _scale_out(rows, hardware, up)
    for (cluster, coll), value in list(up.items()):
        key = (DEFAULT_CLUSTER, coll)
        up[key] = max(up.get(key, 0.0), value)
    for coll in COLLECTIVES:  # stand-ins so that every collective resolves
        if (DEFAULT_CLUSTER, coll) not in up:
            up[(DEFAULT_CLUSTER, coll)] = up[(DEFAULT_CLUSTER, _STAND_IN[coll])]
        if (DEFAULT_CLUSTER, coll) not in out_eff:
            out_eff[(DEFAULT_CLUSTER, coll)] = out_eff[(DEFAULT_CLUSTER, _STAND_IN[coll])]
    if not small_hops:
        raise ConfigError(f"catalog: {path.name}: no small-message (<= 1 KiB) multi-node time: "
                          "the scale-out latency has no source")
    hop[DEFAULT_CLUSTER] = float(np.median(small_hops))
    out_nodes = {k: np.array([2.0]) for k in out_eff}
    clusters = tuple(sorted({c for c, _ in up} | set(hop) | {DEFAULT_CLUSTER}))
    return Network(up=up, out_nodes=out_nodes, out_eff=out_eff,
                   alpha_out_s=hop[DEFAULT_CLUSTER], clusters=clusters, hop_s=hop,
                   chip_up=chip_up)


def load_gemm(catalog_dir: Path) -> dict[tuple[str, str], float]:
    """(accelerator, precision) -> largest measured GEMM fraction of peak; ('*', '*') default."""
    path = Path(catalog_dir) / GEMM_FILE
    frame = _read(path, ("accelerator", "precision", "max_gemm_efficiency", "sources",
                         "derived", "notes"))
    eff = _number(frame, "max_gemm_efficiency", path.name, required=True)
    if (eff > 1).any():
        line = int(np.nonzero(eff > 1)[0][0]) + 2
        raise ConfigError(f"catalog: {path.name} line {line}: max_gemm_efficiency above 1")
    table = {(a, p): float(e) for a, p, e in zip(frame["accelerator"], frame["precision"], eff)}
    if ("*", "*") not in table:
        raise ConfigError(f"catalog: {path.name}: no default row (accelerator '*', precision '*')")
    return table


def load_sm_counts(catalog_dir: Path) -> dict[str, float]:
    """accelerator -> streaming multiprocessors (``sm_count`` of gemm_efficiency.csv, where
    given); a chip without one gets no wave quantization."""
    path = Path(catalog_dir) / GEMM_FILE
    frame = _read(path, ("accelerator",))
    if "sm_count" not in frame.columns:
        return {}
    sms = pd.to_numeric(frame["sm_count"], errors="coerce").to_numpy(float)
    if (sms[np.isfinite(sms)] < 1).any():
        line = int(np.nonzero(np.isfinite(sms) & (sms < 1))[0][0]) + 2
        raise ConfigError(f"catalog: {path.name} line {line}: sm_count below 1")
    return {a: float(s) for a, s in zip(frame["accelerator"], sms) if np.isfinite(s)}


def wave_efficiency(m: np.ndarray, n: np.ndarray, sm_count: np.ndarray) -> np.ndarray:
    """Share of the SMs an m x n GEMM output's tiles keep busy, min(1, tiles / SMs) (module
    docstring; 1 where the SM count is unknown), the better of the tile's two orientations."""
    m, n, sms = (np.asarray(x, float) for x in (m, n, sm_count))
    best = np.zeros(np.broadcast(m, n, sms).shape)
    for a, b in (GEMM_TILE, GEMM_TILE[::-1]):
        tiles = np.ceil(m / a) * np.ceil(n / b)
        with np.errstate(invalid="ignore", divide="ignore"):
            best = np.maximum(best, np.minimum(1.0, tiles / sms))
    return np.where(np.isfinite(sms) & (sms >= 1) & np.isfinite(best), best, 1.0)


def sm_counts_of(table: dict[str, float], accelerator: np.ndarray) -> np.ndarray:
    return np.array([table.get(a, np.nan) for a in accelerator], dtype=float)


def gemm_max_efficiency(table: dict[tuple[str, str], float], accelerator: np.ndarray,
                        precision: np.ndarray) -> np.ndarray:
    """Per row: the chip's measured figure at its precision, else its bf16 one, else default."""
    default = table[("*", "*")]
    return np.array([table.get((a, p), table.get((a, "bf16"), default))
                     for a, p in zip(accelerator, precision)], dtype=float)


def gemm_efficiency(m: np.ndarray, k: np.ndarray, n: np.ndarray, eta_max: np.ndarray,
                    peak_flops_per_s: np.ndarray, hbm_bytes_per_s: np.ndarray,
                    bytes_per_value: np.ndarray, launch_s: float) -> np.ndarray:
    """Achieved fraction of peak of an m x k x n GEMM (module docstring)."""
    flop = 2.0 * m * k * n
    t = np.maximum(flop / (eta_max * peak_flops_per_s),
                   bytes_per_value * (m * k + k * n + m * n) / hbm_bytes_per_s)
    t = np.maximum(t, launch_s)
    return flop / peak_flops_per_s / t
