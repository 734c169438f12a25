"""Frontier search: for a training compute C and duration T, the best layout that finishes.

For each C the laws (``pipeline.theory.laws``) fix N, D, L, d and the batch B = B_crit(C); the
search then looks over layouts (power-of-two tp1, tp2, pp, ep and microbatches m; dp on a
quarter-octave grid, as dp needs no divisibility) for the highest utilization whose training
time S t_step is at most T. All layouts of all C values are
evaluated together as flat numpy arrays; dp is found by a vectorised bisection, which is exact
because for fixed other degrees the utilization never rises with dp (each component per step is
a/dp + c(dp) with c non-decreasing, so dp t_step never falls), so the best feasible dp is the
smallest feasible one. The step time falls with dp except for the slowly rising gradient
reduction, so feasibility is tested at the largest dp first and the bisection keeps a dp only
after evaluating it: a reported layout is always one that was evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.measures import FLOP_PER_PARAM_PER_TOKEN
from pipeline.theory import laws as lw
from pipeline.theory.cost import step_cost
from pipeline.theory.inputs import Layout, Shape
from pipeline.theory.memory import RECOMPUTE, MemoryInputs, fits_in, peak_memory
from pipeline.theory.scenarios import Scenario


@dataclass(frozen=True)
class Frontier:
    """Best layout per training compute (arrays of the length of ``training_flop``)."""

    training_flop: np.ndarray
    utilization: np.ndarray
    feasible: np.ndarray
    train_time_s: np.ndarray
    n_accelerators: np.ndarray
    dp: np.ndarray
    tp1: np.ndarray
    tp2: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    microbatches: np.ndarray
    global_batch_tokens: np.ndarray
    binding: np.ndarray  # component names
    n_evaluations: int
    memory_bytes_per_accelerator: np.ndarray
    fits_memory: np.ndarray


def model_for(flop: np.ndarray, scn: Scenario) -> dict[str, np.ndarray]:
    """N, N_act, L, d, B, S for each C under the scenario's laws (MoE: rho applies to N_act)."""
    n_act = lw.active_params(flop, scn.laws)
    return {
        "active_params": n_act,
        "params": n_act * scn.moe.total_per_active,
        "n_layers": lw.n_layers(flop, scn.laws),
        "d_model": lw.d_model(flop, scn.laws),
        "batch": lw.critical_batch_tokens(flop, scn.laws),
        "steps": lw.optimizer_steps(flop, scn.laws),
    }


def _combos(scn: Scenario, model: dict) -> dict[str, np.ndarray]:
    """Every (log2 tp1, log2 tp2, log2 pp, log2 m, log2 ep) the search may use at some C."""
    top, width = scn.search.max_log2_degree, scn.search.min_shard_width
    hidden = model["active_params"] / (2.0 * model["n_layers"] * model["d_model"])

    def upto(limit: np.ndarray) -> np.ndarray:
        return np.arange(int(min(top, np.floor(np.log2(max(float(np.max(limit)), 1.0))))) + 1)

    tp1 = upto(hidden / width)
    tp2 = upto(model["d_model"] / width) if scn.search.two_d_tp else np.zeros(1, int)
    pp = upto(model["n_layers"])
    sparse = scn.moe.expert_fraction > 0
    ep = np.arange(int(np.log2(scn.moe.n_experts)) + 1) if sparse else np.zeros(1, int)
    # m = 1, or pp * 2^j for j = 0..log2(max_microbatches_per_stage): with interleaving m >= pp
    # is needed, and m below pp only lengthens the bubble.
    jmax = int(np.log2(scn.search.max_microbatches_per_stage))
    mj = np.arange(-1, jmax + 1)  # -1 encodes m = 1
    grid = np.meshgrid(tp1, tp2, pp, mj, ep, indexing="ij")
    g = {k: a.ravel() for k, a in zip(("tp1", "tp2", "pp", "mj", "ep"), grid)}
    log_m = np.where(g["mj"] < 0, 0, g["pp"] + np.maximum(g["mj"], 0))
    keep = (g["pp"] > 0) | (g["mj"] < 0)  # pp = 1: only m = 1 (more microbatches gain nothing)
    keep &= log_m <= top
    out = {k: a[keep] for k, a in g.items()}
    out["m"] = log_m[keep]
    return out


def _evaluate(scn: Scenario, model: dict, idx: np.ndarray, combo: dict, k: np.ndarray,
              dp: np.ndarray):
    """Step cost of layouts ``k`` (combo indices) at data-parallel degree ``dp``, C ``idx``."""
    mdl = {key: val[idx] for key, val in model.items()}
    tp1, tp2, pp = 2.0 ** combo["tp1"][k], 2.0 ** combo["tp2"][k], 2.0 ** combo["pp"][k]
    m, ep = 2.0 ** combo["m"][k], 2.0 ** combo["ep"][k]
    if scn.search.interleave == "max":
        v = np.where(m >= pp, np.maximum(mdl["n_layers"] / pp, 1.0), 1.0)
    else:
        v = np.ones_like(m)
    moe = scn.moe
    shape = Shape(params=mdl["params"], active_params=mdl["active_params"],
                  n_layers=mdl["n_layers"], d_model=mdl["d_model"],
                  expert_fraction=moe.expert_fraction, top_k=moe.top_k, n_experts=moe.n_experts)
    layout = Layout(dp=dp, tp1=tp1, tp2=tp2, pp=pp, ep=ep, microbatches=m,
                    zero_stage=scn.search.zero_stage, interleave=v)
    cost_of = step_cost if scn.efficiency is None else scn.efficiency.step_cost
    cost = cost_of(scn.hardware, shape, layout, mdl["batch"], scn.constants)
    return cost, cost.t_step_s * mdl["steps"]


def search(scn: Scenario, flop) -> Frontier:
    """Best layout for each C in ``flop`` (1-D array), see the module docstring."""
    flop = np.atleast_1d(np.asarray(flop, dtype=float))
    model = model_for(flop, scn)
    combo = _combos(scn, model)
    s, q = scn.search, float(scn.search.dp_steps_per_octave)
    idx, k, lo_j, hi_j = _cells(scn, model, combo, flop, q)
    duration = scn.duration_s

    # Branch and bound. u falls with dp, so u at lo caps a layout's utilization; a layout
    # feasible at lo is done. Infeasible at hi means infeasible at any dp.
    lo_cost, time_lo = _evaluate(scn, model, idx, combo, k, _dp(lo_j, q))
    hi_cost, time_hi = _evaluate(scn, model, idx, combo, k, _dp(hi_j, q))
    n_eval = 2 * idx.size
    at_lo = time_lo <= duration
    feasible = (time_hi <= duration) | at_lo
    f_idx, f_k = idx[feasible], k[feasible]
    f_lo, f_hi = lo_j[feasible], np.where(at_lo, lo_j, hi_j)[feasible]
    f_u = np.where(at_lo, lo_cost.utilization, hi_cost.utilization)[feasible]
    cap = lo_cost.utilization[feasible]
    best = np.full(flop.size, -np.inf)
    _group_max_into(best, f_idx, f_u)
    # Bisect the most promising layouts of each C first (highest cap), so that the bound
    # prunes the rest early; then everything whose cap still beats the best.
    rank = _rank_within(f_idx, -cap)
    for subset in (rank < _FIRST_ROUND, rank >= _FIRST_ROUND):
        while True:
            live = np.nonzero(subset & (f_lo < f_hi) & (cap > best[f_idx]))[0]
            if live.size == 0:
                break
            mid = np.floor((f_lo[live] + f_hi[live]) / 2.0)
            cost, t_mid = _evaluate(scn, model, f_idx[live], combo, f_k[live], _dp(mid, q))
            n_eval += live.size
            good = t_mid <= duration
            u_mid = cost.utilization
            f_hi[live] = np.where(good, mid, f_hi[live])
            f_u[live] = np.where(good, u_mid, f_u[live])
            f_lo[live] = np.where(good, f_lo[live], mid + 1.0)
            cap[live] = np.where(good, cap[live], u_mid)
            _group_max_into(best, f_idx[live][good], u_mid[good])

    # Pick per C: feasible -> highest utilization; none feasible -> the fastest layout at hi.
    all_idx = np.concatenate([f_idx, idx])
    all_k = np.concatenate([f_k, k])
    all_j = np.concatenate([f_hi, hi_j])
    all_feas = np.concatenate([np.ones(f_idx.size, bool), np.zeros(idx.size, bool)])
    score = np.where(all_feas, np.concatenate([f_u, hi_cost.utilization]), -np.concatenate(
        [np.zeros(f_idx.size), time_hi]))
    order = np.lexsort((np.arange(all_idx.size), -score, ~all_feas, all_idx))
    first = np.ones(order.size, bool)
    first[1:] = all_idx[order][1:] != all_idx[order][:-1]
    pick = order[first]
    c, kk, dp = all_idx[pick], all_k[pick], _dp(all_j[pick], q)
    chosen, chosen_time = _evaluate(scn, model, c, combo, kk, dp)
    out = _empty(flop, model)
    out["utilization"][c] = chosen.utilization
    out["feasible"][c] = all_feas[pick]
    out["train_time_s"][c] = chosen_time
    out["dp"][c] = dp
    for name in ("tp1", "tp2", "pp", "ep"):
        out[name][c] = 2.0 ** combo[name][kk]
    out["microbatches"][c] = 2.0 ** combo["m"][kk]
    out["binding"][c] = chosen.binding_names()
    out["n_accelerators"] = out["dp"] * out["tp1"] * out["tp2"] * out["pp"] * out["ep"]
    memory = np.full(flop.size, np.nan)
    memory[c] = layout_memory(scn, model, combo, c, kk, dp)
    out["memory_bytes_per_accelerator"] = memory
    out["fits_memory"] = fits_in(memory, float(np.asarray(scn.hardware.hbm_bytes)),
                                 scn.memory_constants)
    if scn.search.memory_check:  # feasible: finishes within the duration AND fits in HBM
        out["feasible"] &= out["fits_memory"]
    return Frontier(training_flop=flop, n_evaluations=int(n_eval + c.size), **out)


def _cells(scn: Scenario, model: dict, combo: dict, flop: np.ndarray, q: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The (C index, combo index) cells worth evaluating, with their dp grid range [lo, hi].

    Caps: shard widths, pp <= L, the smallest microbatch (hi), the G cap, memory (lo), and
    G >= C / (F T) (lo: fewer chips cannot finish even at utilization 1). Cells whose time
    lower bound exceeds T are dropped; a C left with no cell keeps its largest-G valid cell
    so that every C reports a layout.
    """
    s = scn.search
    hidden = model["active_params"] / (2.0 * model["n_layers"] * model["d_model"])
    ok = 2.0 ** combo["tp1"][None, :] <= (hidden / s.min_shard_width)[:, None]
    ok &= 2.0 ** combo["tp2"][None, :] <= (model["d_model"] / s.min_shard_width)[:, None]
    ok &= 2.0 ** combo["pp"][None, :] <= model["n_layers"][:, None]
    idx, k = np.nonzero(ok)
    log_chips = combo["tp1"][k] + combo["tp2"][k] + combo["pp"][k] + combo["ep"][k]
    # dp runs over floor(2^(j/q)), j = 0, 1, ...; hi: most replicas the batch allows.
    log_dp_max = (np.log2(model["batch"][idx] / s.min_microbatch_tokens) - combo["m"][k]
                  - combo["ep"][k])
    if s.max_accelerators > 0:
        log_dp_max = np.minimum(log_dp_max, np.log2(s.max_accelerators) - log_chips)
    hi = np.floor(q * np.minimum(log_dp_max, s.max_log2_degree) + 1e-9)
    keep = np.isfinite(hi) & (hi >= 0)
    idx, k, hi, log_chips = idx[keep], k[keep], hi[keep], log_chips[keep]
    g_min = flop[idx] / (float(np.asarray(scn.hardware.peak_flops_per_s)) * scn.duration_s)
    lo = np.maximum(np.ceil(q * (np.log2(g_min) - log_chips) - 1e-9), 0.0)
    # The memory bound only raises lo, so it is computed for the cells that pass the cheap
    # tests (hi >= lo and the time bound) alone: the others are dropped whatever it says.
    worth = (hi >= lo) & (_time_lower_bound(scn, model, combo, idx, k, hi, q)
                          <= scn.duration_s)
    if s.memory_check:
        w = np.nonzero(worth)[0]
        lo_w = np.maximum(lo[w], np.ceil(
            q * _memory_log2_dp(scn, model, combo, idx[w], k[w]) - 1e-9))
        lo[w] = _fitting_lo(scn, model, combo, idx[w], k[w], lo_w, hi[w], q)
        worth &= hi >= lo
    has_cell = np.zeros(flop.size, bool)
    has_cell[idx[worth]] = True
    orphan = ~has_cell[idx]
    if orphan.any():  # per orphan C, its cell with the most chips (first on ties)
        o = np.nonzero(orphan)[0]
        order = o[np.lexsort((o, -(hi[o] + q * log_chips[o]), idx[o]))]
        first = order[np.r_[True, idx[order][1:] != idx[order][:-1]]]
        worth[first] = True
        lo[first] = hi[first]
    return idx[worth], k[worth], lo[worth], hi[worth]


def _time_lower_bound(scn: Scenario, model: dict, combo: dict, idx: np.ndarray, k: np.ndarray,
                      hi: np.ndarray, q: float) -> np.ndarray:
    """A training time no layout of a cell can beat, at any dp: S times the larger of the FLOP
    time at the largest dp and the weight traffic, plus the latency chain with every TP
    collective taken at scale-up latency. Cells above T are skipped unevaluated."""
    hw, const = scn.hardware, scn.constants
    l_tp = combo["tp1"][k] + combo["tp2"][k]
    log_g = hi / q + l_tp + combo["pp"][k] + combo["ep"][k]
    flop_step = FLOP_PER_PARAM_PER_TOKEN * model["active_params"][idx] * model["batch"][idx]
    t_flop = flop_step / (2.0**log_g * float(np.asarray(hw.peak_flops_per_s)))
    local = _local_params(scn, model, combo, idx, k)
    t_weights = (2.0 ** combo["m"][k]) * const.weight_passes * local \
        * const.bytes_per_value / float(np.asarray(hw.hbm_bytes_per_s))
    n_tp = (combo["tp1"][k] > 0).astype(float) + (combo["tp2"][k] > 0)
    tau = (const.kernels_per_layer * float(np.asarray(hw.kernel_latency_s))
           + 2.0 * const.blocks_per_layer * n_tp * float(np.asarray(hw.scaleup_latency_s)))
    # calibrated efficiencies scale each bound term (their step time is a sum of scaled terms)
    c, h, lat = (1.0, 1.0, 1.0) if scn.efficiency is None else scn.efficiency.bound_scale
    return model["steps"][idx] * (np.maximum(c * t_flop, h * t_weights)
                                  + lat * model["n_layers"][idx] * tau)


def _local_params(scn: Scenario, model: dict, combo: dict, idx: np.ndarray, k: np.ndarray
                  ) -> np.ndarray:
    """Parameters per chip: the dense part over tp pp, the experts also over ep."""
    tp_pp = 2.0 ** (combo["tp1"][k] + combo["tp2"][k] + combo["pp"][k])
    dense = model["active_params"][idx] * (1.0 - scn.moe.expert_fraction)
    return dense / tp_pp + (model["params"][idx] - dense) / (tp_pp * 2.0 ** combo["ep"][k])


def _group_max_into(best: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
    """best[i] = max(best[i], values of group i); ``ids`` sorted (cells come C by C)."""
    if ids.size == 0:
        return
    starts = np.r_[0, np.nonzero(ids[1:] != ids[:-1])[0] + 1]
    group = ids[starts]
    best[group] = np.maximum(best[group], np.maximum.reduceat(values, starts))


_FIRST_ROUND = 16  # layouts per C bisected before the bound is applied to the rest


def _rank_within(group: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Rank of each element by ``key`` (ascending) within its ``group`` (0 = first)."""
    order = np.lexsort((np.arange(group.size), key, group))
    sorted_group = group[order]
    starts = np.r_[0, np.nonzero(sorted_group[1:] != sorted_group[:-1])[0] + 1]
    run = np.zeros(group.size, dtype=np.int64)
    run[starts[1:]] = starts[1:] - starts[:-1]
    position = np.arange(group.size) - np.repeat(starts, np.diff(np.r_[starts, group.size]))
    rank = np.empty(group.size, dtype=np.int64)
    rank[order] = position
    return rank


def _dp(j: np.ndarray, q: float) -> np.ndarray:
    """dp for grid index j: floor(2^(j/q)), so q = 1 gives the powers of two."""
    return np.floor(2.0 ** (j / q) + 1e-9)


def _empty(flop: np.ndarray, model: dict) -> dict:
    n = flop.size
    nan = np.full(n, np.nan)
    return {"utilization": np.zeros(n), "feasible": np.zeros(n, bool),
            "train_time_s": np.full(n, np.inf), "dp": nan.copy(), "tp1": nan.copy(),
            "tp2": nan.copy(), "pp": nan.copy(), "ep": nan.copy(), "microbatches": nan.copy(),
            "global_batch_tokens": model["batch"].copy(),
            "binding": np.full(n, "none", dtype=object), "n_accelerators": nan.copy()}


def _memory_inputs(scn: Scenario, model: dict, combo: dict, idx: np.ndarray, k: np.ndarray,
                   dp: np.ndarray) -> MemoryInputs:
    """The memory model's view of layouts ``k`` at C ``idx``: the scenario's ZeRO stage, full
    recompute and sequence parallelism (the least memory a layout can get by with; the cost
    model counts no recompute FLOP, as ml_par_sim), the microbatch as tokens / seq_len."""
    tp = 2.0 ** (combo["tp1"][k] + combo["tp2"][k])
    pp, m, ep = 2.0 ** combo["pp"][k], 2.0 ** combo["m"][k], 2.0 ** combo["ep"][k]
    seq = float(Shape.seq_len)
    micro_tokens = model["batch"][idx] / (dp * ep * m)
    moe = scn.moe
    dense = model["active_params"][idx] * (1.0 - moe.expert_fraction)
    v = np.where(m >= pp, np.maximum(model["n_layers"][idx] / pp, 1.0), 1.0) \
        if scn.search.interleave == "max" else np.ones_like(m)
    return MemoryInputs(params=model["params"][idx], n_layers=model["n_layers"][idx],
                        d_model=model["d_model"][idx], seq_len=seq,
                        micro_batch=micro_tokens / seq, expert_params=model["params"][idx] - dense,
                        top_k=float(moe.top_k), dp=dp * ep, tp=tp, pp=pp, ep=ep,
                        zero_stage=float(scn.search.zero_stage), microbatches=m,
                        virtual_pipeline=v, recompute=RECOMPUTE.index("full"),
                        sequence_parallel=tp > 1)


def layout_memory(scn: Scenario, model: dict, combo: dict, idx: np.ndarray, k: np.ndarray,
                  dp: np.ndarray) -> np.ndarray:
    """Predicted peak bytes per accelerator (with the scenario's fitted overhead)."""
    parts = peak_memory(_memory_inputs(scn, model, combo, idx, k, dp), scn.memory_constants)
    return scn.memory_overhead.apply(parts)


def _fitting_lo(scn: Scenario, model: dict, combo: dict, idx: np.ndarray, k: np.ndarray,
                lo: np.ndarray, hi: np.ndarray, q: float, rounds: int = 8) -> np.ndarray:
    """``lo`` raised until the layout fits at dp = floor(2^(lo/q)): the bound of
    ``_memory_log2_dp`` is exact for the real-valued dp, and the grid's floor may land just
    below it (then the frontier would call a layout feasible that does not fit). Memory falls
    with dp, so every dp from the returned ``lo`` up fits; a cell still not fitting after
    ``rounds`` steps (or past ``hi``) is left to the ``hi >= lo`` test."""
    hbm = float(np.asarray(scn.hardware.hbm_bytes))
    lo = lo.copy()
    pending = np.arange(lo.size)  # cells not yet seen to fit at their lo
    for _ in range(rounds):
        pending = pending[lo[pending] <= hi[pending]]
        if pending.size == 0:
            break
        memory = layout_memory(scn, model, combo, idx[pending], k[pending],
                               _dp(lo[pending], q))
        pending = pending[~fits_in(memory, hbm, scn.memory_constants)]
        lo[pending] += 1.0
    return lo


def _memory_log2_dp(scn: Scenario, model: dict, combo: dict, idx: np.ndarray, k: np.ndarray
                    ) -> np.ndarray:
    """Smallest log2 dp at which a layout fits in HBM; inf where none does. Every part of the
    peak is a + b / dp (ZeRO shards and the microbatch both fall as 1 / dp at a fixed m), so
    a = memory at dp -> inf and b = memory at dp = 1 - a give dp = b / (HBM - a) exactly."""
    # the room: the driver's capacity less the runtime's reserve (memory.fits_in)
    hbm = float(np.asarray(scn.hardware.hbm_bytes)) - scn.memory_constants.runtime_reserve_bytes
    one = layout_memory(scn, model, combo, idx, k, np.ones(idx.size))
    rest = layout_memory(scn, model, combo, idx, k, np.full(idx.size, 1e30))
    room = hbm - rest
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.log2(np.maximum(one - rest, 0.0) / room)
    return np.where(room > 0, np.maximum(need, 0.0), np.inf)
