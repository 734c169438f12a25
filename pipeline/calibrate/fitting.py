"""Estimation of the family parameters: a robust, hierarchical nonlinear least-squares fit of
log step time (docs/theory.md §11.4).

For run i of source s in family f:

    log t_i = log T(x_i; theta_f) + u_s + e_i,   e_i / sigma_s ~ Huber,   u_s ~ N(0, sigma_u^2)

T is :func:`pipeline.calibrate.critical_path.step_components` (the same function the frontier
and the planner use). Each parameter lives on a bounded physical range through a logistic
transform z (``BOUNDS``); the production families' z are a population value plus a family
deviation (z_f = z_pop + delta_f, delta_f ~ N(0, tau_f^2)), the population has a weak
prior centred on ``PRIOR_CENTRE``. Partial pooling (Gelman & Hill 2007, §12.2-12.5): a family's
values are a compromise between its own runs and the population, and the prior's share grows as
its data shrink. Beyond what the likelihood already gives (runs of one configuration repeated
weigh as much as distinct ones), tau_f^2 = ``FAMILY_SD``^2 m_f / (m_f + m_0): m_f the family's
distinct configurations (``distinct_configs``), m_0 = ``POOL_CONFIGS_PER_PARAMETER`` x the
parameters fitted, so a family with one configuration is held near the population and one
with many keeps the constant prior (``family_prior_sd``). A family without runs (or with its only source held out)
gets the population value. The Playbook is fitted alone (its own family, no random effect)
with its residual sd held at least at its measured repeat noise. The residual sd of each
source is updated between solves (EM, with ``VARIANCE_PRIOR_RUNS`` runs of the pooled variance
as a prior so a source with 1-3 runs keeps a finite weight), sigma_u likewise.

Many sources. Each source effect u_s moves only its own runs' residuals and its prior's row,
so for given family values the best u_s of each source is a one-dimensional convex problem
(``source_effects``). Past ``PROFILE_MIN_SOURCES`` sources (a fleet's logs, one source per
campaign) the effects are profiled out: the solver moves the family values alone, each
evaluation solving every u_s exactly (variable projection, Golub & Pereyra 1973). The optimum
is the joint one; the dense solve's SVD of runs x (family values + sources) per step, which grew
with the square of the sources and failed to converge on 417 campaigns of generated logs, is
replaced by one of runs x family values, and J'J of the family columns is the Schur complement
of the source block, so the covariance is the same. One solve reaches the dense solve's optimum
(80 simulated sources: 2e-7 in the family values, 2e-8 relative in the covariance; checked in
``tests/test_calibrate_fleet.py``). Over EM rounds the two paths can settle in different local
optima of this non-convex problem (600 simulated sources, 3,000 runs, 3 rounds: log-likelihood
5254.0134 against the dense 5254.0156, family values within 0.003 in z), at a fifth of the CPU
time. Below the threshold the dense solve is kept: it is faster there, and the shipped data's
outputs stay as they were.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from pipeline.calibrate.critical_path import PARAMETERS, Theta, step_components
from pipeline.calibrate.families import PLAYBOOK_NOISE_FLOOR
from pipeline.frameworks import PLAYBOOK
from pipeline.calibrate.step import Rows

# Physical ranges: eta (the family's rate relative to the measured GEMM rate), omega (share of
# TP/CP/EP traffic hidden behind compute), phi (share of the backward window the gradient
# traffic hides in), c0 (fixed seconds per step), k (seconds per layer and microbatch: up to
# 5 ms, above the 2-4 ms per layer and microbatch vTrain's single-node Megatron-DeepSpeed sweep
# runs outside its GEMMs, docs/theory.md §10.3).
BOUNDS = {"compute_efficiency": (0.3, 1.0), "tp_overlap": (0.0, 0.95),
          "dp_overlap": (0.0, 1.0), "fixed_s": (0.0, 2.0), "layer_overhead_s": (0.0, 5e-3),
          "attention_efficiency": (0.2, 1.0), "expert_overhead_s": (0.0, 5e-3)}
# k's centre: ~30 small kernels per layer forward + backward at theory.latency's 3 us launch
PRIOR_CENTRE = {"compute_efficiency": 0.85, "tp_overlap": 0.5, "dp_overlap": 0.8,
                "fixed_s": 0.05, "layer_overhead_s": 1e-4, "attention_efficiency": 0.7,
                # ~30 launches (router, permute, per-expert GEMMs and activations forward and
                # backward) at theory.latency's 3 us per local expert and MoE layer
                "expert_overhead_s": 1e-4}
PRIOR_SD_Z = 1.5          # weak: about the whole range in logistic units
FAMILY_SD = 0.75          # family deviation from the population, logistic units
# m_0 of the family prior (module docstring): distinct configurations per fitted parameter at
# which a family's deviation keeps half of FAMILY_SD^2 (0: the constant prior).
POOL_CONFIGS_PER_PARAMETER = 1.0
HUBER_K = 1.345           # 95% efficiency at the normal (Huber 1964)
# From this many sources on, the source effects are profiled out of the solve (module
# docstring, "Many sources").
PROFILE_MIN_SOURCES = 200
VARIANCE_PRIOR_RUNS = 5.0
SIGMA_U_START = 0.15
# Value of a parameter a form does not fit: no overlap, no fixed cost.
OFF = {"tp_overlap": 0.0, "dp_overlap": 0.0, "fixed_s": 0.0, "layer_overhead_s": 0.0,
       "attention_efficiency": 1.0, "expert_overhead_s": 0.0}


def to_natural(z: np.ndarray) -> np.ndarray:
    lo = np.array([BOUNDS[p][0] for p in PARAMETERS])
    hi = np.array([BOUNDS[p][1] for p in PARAMETERS])
    return lo + (hi - lo) / (1.0 + np.exp(-np.asarray(z, float)))


def to_z(theta: np.ndarray) -> np.ndarray:
    lo = np.array([BOUNDS[p][0] for p in PARAMETERS])
    hi = np.array([BOUNDS[p][1] for p in PARAMETERS])
    frac = np.clip((np.asarray(theta, float) - lo) / (hi - lo), 1e-6, 1 - 1e-6)
    return np.log(frac / (1.0 - frac))


def natural_derivative(z: np.ndarray) -> np.ndarray:
    lo = np.array([BOUNDS[p][0] for p in PARAMETERS])
    hi = np.array([BOUNDS[p][1] for p in PARAMETERS])
    s = 1.0 / (1.0 + np.exp(-np.asarray(z, float)))
    return (hi - lo) * s * (1.0 - s)


@dataclass
class GroupFit:
    """One fitted group: production (families, sources with random effects) or the Playbook."""

    families: list[str]
    z_pop: np.ndarray
    z_family: dict[str, np.ndarray]
    sources: list[str]
    u: dict[str, float]
    sigma: dict[str, float]
    sigma_pool: float
    sigma_u: float
    cov_z: dict[str, np.ndarray] = field(default_factory=dict)   # per family and "population"
    n_runs: dict[str, int] = field(default_factory=dict)         # per family
    n_runs_source: dict[str, int] = field(default_factory=dict)
    loglik: float = float("nan")
    free: tuple[str, ...] = PARAMETERS
    n_params: int = 0

    def _held(self, theta: np.ndarray) -> np.ndarray:
        theta = theta.copy()
        for j, p in enumerate(PARAMETERS):
            if p not in self.free:
                theta[j] = OFF[p]
        return theta

    def theta(self, family: str) -> np.ndarray:
        return self._held(to_natural(self.z_family.get(family, self.z_pop)))

    @property
    def population(self) -> np.ndarray:
        return self._held(to_natural(self.z_pop))

    def aicc(self, n: int) -> float:
        k = self.n_params
        return float(2 * k - 2 * self.loglik + (2 * k * (k + 1) / (n - k - 1) if n > k + 1
                                                 else np.inf))

    def bic(self, n: int) -> float:
        return float(self.n_params * np.log(n) - 2 * self.loglik)


def _subset(rows: Rows, index: np.ndarray) -> Rows:
    """Rows at ``index`` (a mask over the rows, or row positions, repeats allowed) in every
    per-row array of config and machine."""
    n_rows = rows.family.shape[:1]

    def cut(obj):
        values = {}
        for f in fields(obj):
            v = getattr(obj, f.name)
            values[f.name] = v[index] if isinstance(v, np.ndarray) and v.shape[:1] == n_rows \
                else v
        return replace(obj, **values)
    return Rows(config=cut(rows.config), machine=cut(rows.machine), family=rows.family[index],
                source=rows.source[index], ok=rows.ok[index],
                n_accelerators=rows.n_accelerators[index],
                peak_flops_per_s=rows.peak_flops_per_s[index], defaults=rows.defaults,
                interval_class=None if rows.interval_class is None
                else rows.interval_class[index])


def log_step_time(rows: Rows, theta_rows: np.ndarray) -> np.ndarray:
    th = Theta(*(theta_rows[:, j] for j in range(theta_rows.shape[1])))
    return np.log(step_components(rows.config, rows.machine, th)["step_time_s"])


class _GroupProblem:
    """One group's penalised least-squares problem (module docstring): the unknowns ``x`` are
    the population values (P), the family deviations (F x P, when several families) and the
    source effects (S, when several sources), all on the logistic scale; the residual sds
    ``sig`` (per source) and ``sig_u`` are held while a solve runs and updated between solves.
    """

    def __init__(self, rows: Rows, log_t: np.ndarray, *, playbook: bool,
                 start: GroupFit | None, fixed_sigma: GroupFit | None,
                 free: tuple[str, ...], balance: float,
                 pool_configs: float = POOL_CONFIGS_PER_PARAMETER) -> None:
        self.rows, self.log_t, self.free = rows, log_t, free
        self.fams = sorted(set(rows.family.tolist()))
        self.sources = sorted(set(rows.source.tolist()))
        # positions by dict, not list.index: a fleet's logs make thousands of sources (campaigns)
        self.f_idx = _positions(rows.family, self.fams)
        self.s_idx = _positions(rows.source, self.sources)
        self.F, self.S, self.P = F, S, P = len(self.fams), len(self.sources), len(PARAMETERS)
        self.use_u = not playbook and S > 1
        # the sweeps' group: each sweep its own family (a deviation from the group's centre)
        self.use_delta = F > 1
        self.prior = to_z(np.array([PRIOR_CENTRE[p] for p in PARAMETERS]))
        self.n_src = np.bincount(self.s_idx, minlength=S)
        self.weight = np.sqrt((self.n_src.mean() / self.n_src[self.s_idx]) ** balance)
        self.off = P + (F * P if self.use_delta else 0)   # where the source effects start in x
        self.held = [j for j, p in enumerate(PARAMETERS) if p not in free]
        # each family deviation's prior sd, flattened as the deviations are in x
        self.tau = np.repeat(family_prior_sd(distinct_configs(rows, self.f_idx, F),
                                             len(free), pool_configs), P)
        ref = fixed_sigma or start
        if ref is not None:
            sig = np.array([ref.sigma.get(s, ref.sigma_pool) for s in self.sources])
            self.sig_u = ref.sigma_u if self.use_u else 1.0
        else:
            sig = np.full(S, 0.3)
            self.sig_u = SIGMA_U_START
        # the Playbook's measured repeat noise floors its residual sd (not another sweep's)
        noisy = np.bincount(self.s_idx, weights=(rows.family == PLAYBOOK).astype(float),
                            minlength=S) > 0
        self.floor = np.where(playbook & noisy, PLAYBOOK_NOISE_FLOOR, 1e-3)
        self.sig = np.maximum(sig, self.floor)
        self._last: dict[str, Any] = {}   # the step function at the last family values
        self.n = n = log_t.size
        # The runs each family column moves: all for a population value, the family's own for a
        # deviation, none for a held parameter (held at OFF whatever its z). Their step times at
        # the stepped values are one call of the step function on these rows stacked.
        self.moved = []
        for i in range(self.off):
            j = i if i < P else (i - P) % P
            self.moved.append(np.zeros(0, dtype=int) if j in self.held else
                              np.arange(n) if i < P else np.flatnonzero(self.f_idx == (i - P) // P))
        self.stacked = _subset(rows, np.concatenate(self.moved)) if self.off else rows
        self.ends = np.cumsum([m.size for m in self.moved])
        # Many sources: the source effects are solved exactly for given family values (each
        # source alone, ``source_effects``) and the solver moves the family values only (module
        # docstring, "Many sources"): the same optimum, with a Jacobian of runs x family values.
        self.profiled = self.use_u and S >= PROFILE_MIN_SOURCES

    def unpack(self, x):
        z_pop = x[:self.P]
        delta = x[self.P:self.off].reshape(self.F, self.P) if self.use_delta \
            else np.zeros((self.F, self.P))
        u = x[self.off:] if self.use_u else np.zeros(self.S)
        return z_pop, delta, u

    def theta_rows(self, x):
        z_pop, delta, _ = self.unpack(x)
        th = to_natural(z_pop[None, :] + delta)[self.f_idx]
        for j in self.held:
            th[:, j] = OFF[PARAMETERS[j]]
        return th

    def modelled(self, x):
        """The runs' modelled log step times (memoised on the family values: the source effects
        leave them)."""
        key = x[:self.off].tobytes()
        if self._last.get("key") != key:
            self._last["key"], self._last["lst"] = key, log_step_time(self.rows, self.theta_rows(x))
        return self._last["lst"]

    def resid(self, x):
        return self.residuals(x, self.modelled(x))

    def residuals(self, x, lst):
        """The residual vector at ``x`` with the runs' modelled log step times ``lst``."""
        z_pop, delta, u = self.unpack(x)
        r = self.weight * (self.log_t - lst - u[self.s_idx]) / self.sig[self.s_idx]
        parts = [r, (z_pop - self.prior) / PRIOR_SD_Z]
        if self.use_delta:
            parts.append(delta.ravel() / self.tau)
        if self.use_u:
            parts.append(u / self.sig_u)
        return np.concatenate(parts)

    def stepped_thetas(self, x, h):
        blocks = []
        for i, mine in enumerate(self.moved):
            if mine.size:
                x1 = x.copy()
                x1[i] = x[i] + h[i]
                blocks.append(self.theta_rows(x1)[mine])
        return np.concatenate(blocks) if blocks else np.zeros((0, self.P))

    def stepped_lst(self, x, h):
        """Each family column's step times at its stepped value, on the runs it moves."""
        ends = self.ends
        lst_stacked = log_step_time(self.stacked, self.stepped_thetas(x, h)) \
            if ends.size and ends[-1] else np.zeros(0)
        return [lst_stacked[ends[i] - mine.size:ends[i]] for i, mine in enumerate(self.moved)]

    def jac(self, x):
        """scipy's forward differences (its 2-point steps, column by column), written from the
        rows a column moves: a family value's from one step-function call on the stacked runs it
        moves, a source effect's from its source's rows, each with its prior's row. The same
        numbers as stepping the whole residual vector, without a call per column (per-call
        overhead dominated) or per source (which made a Jacobian cost runs x sources)."""
        n, off, S, s_idx, weight, sig, log_t = (self.n, self.off, self.S, self.s_idx,
                                                 self.weight, self.sig, self.log_t)
        f0 = self.resid(x)
        h = _forward_step(x)
        jt = np.empty((x.size, f0.size))
        _, _, u = self.unpack(x)
        for i, (mine, lst) in enumerate(zip(self.moved, self.stepped_lst(x, h))):
            x1_i = x[i] + h[i]
            f1 = f0.copy()
            if mine.size:
                f1[mine] = weight[mine] * (log_t[mine] - lst - u[s_idx[mine]]) / sig[s_idx[mine]]
            # the prior's row of this column: population value or family deviation
            f1[n + i] = (x1_i - self.prior[i]) / PRIOR_SD_Z if i < self.P \
                else x1_i / self.tau[i - self.P]
            jt[i] = (f1 - f0) / (x1_i - x[i])
        if self.use_u:
            # A source effect's column moves its source's runs and its prior's row, nothing
            # else: every run's entry in one pass (each run has one source).
            cols = np.arange(S)
            u1 = x[off:] + h[off:]
            step = u1 - x[off:]
            on_runs = (weight * (log_t - self.modelled(x) - u1[s_idx]) / sig[s_idx] - f0[:n]) \
                / step[s_idx]
            jt[off:] = (0.0 / step)[:, None]   # the zeros (f1 - f0) / step writes, signed alike
            jt[off + s_idx, np.arange(n)] = on_runs
            jt[off + cols, f0.size - S + cols] = (u1 / self.sig_u - f0[f0.size - S:]) / step
        return jt.T

    def effects(self, lst):
        w = self.weight / self.sig[self.s_idx]
        return source_effects(self.weight * (self.log_t - lst) / self.sig[self.s_idx], w,
                              self.s_idx, self.S, self.sig_u)

    def full(self, theta_x):
        # ``modelled`` reads the family values only: its memo then serves ``resid`` on the result
        return np.concatenate([theta_x, self.effects(self.modelled(theta_x))])

    def presid(self, theta_x):
        return self.resid(self.full(theta_x))

    def pjac(self, theta_x):
        off = self.off
        x = self.full(theta_x)
        f0 = self.resid(x)
        h = _forward_step(theta_x)
        lst0 = self.modelled(x)
        jt = np.empty((off, f0.size))
        for i, (mine, lst) in enumerate(zip(self.moved, self.stepped_lst(x, h))):
            x1 = x.copy()
            x1[i] = x[i] + h[i]
            lst1 = lst0.copy()
            lst1[mine] = lst
            x1[off:] = self.effects(lst1)
            jt[i] = (self.residuals(x1, lst1) - f0) / (x1[i] - x[i])
        return jt.T

    def solve(self, x):
        """One solve from ``x``: (scipy's result, the full unknown vector at its optimum)."""
        if self.profiled:
            res = _solve(self.presid, x[:self.off], self.pjac, self.S)
            return res, self.full(res.x)
        res = _solve(self.resid, x, self.jac, self.S)
        return res, res.x

    def errors(self, x):
        """Each run's log step-time error at ``x`` (source effect included)."""
        _, _, u = self.unpack(x)
        return self.log_t - log_step_time(self.rows, self.theta_rows(x)) - u[self.s_idx]

    def update_sigmas(self, x) -> None:
        """The residual sds given the fit at ``x``: each source's shrunk toward the pooled one
        by ``VARIANCE_PRIOR_RUNS`` runs, and the sd of the source effects."""
        e = self.errors(x)
        pool = float(np.sum(e ** 2) / max(self.n - self.P, 1))
        ss = np.bincount(self.s_idx, weights=e ** 2, minlength=self.S)
        self.sig = np.maximum(np.sqrt((ss + VARIANCE_PRIOR_RUNS * pool)
                                      / (self.n_src + VARIANCE_PRIOR_RUNS)), self.floor)
        if self.use_u:
            _, _, u = self.unpack(x)
            self.sig_u = float(np.sqrt(max(np.mean(u ** 2), 1e-4)))

    def result(self, x, res) -> GroupFit:
        fams, sources, sig, n_src, f_idx = self.fams, self.sources, self.sig, self.n_src, self.f_idx
        z_pop, delta, u = self.unpack(x)
        e = self.errors(x)
        cov_z = _covariances(res.jac, fams, self.use_delta)
        sig_i = sig[self.s_idx]
        loglik = float(-0.5 * np.sum(np.log(2 * np.pi * sig_i ** 2) + e ** 2 / sig_i ** 2))
        n_free = len(self.free) * (self.F if self.use_delta else 1) \
            + (self.S + 1 if self.use_u else 0) + self.S
        return GroupFit(
            families=fams, z_pop=z_pop.copy(), free=tuple(self.free), n_params=n_free,
            z_family={f: z_pop + delta[i] for i, f in enumerate(fams)},
            sources=sources, u={s: float(u[i]) for i, s in enumerate(sources)},
            sigma={s: float(sig[i]) for i, s in enumerate(sources)},
            sigma_pool=float(np.sqrt(np.sum(e ** 2) / max(self.n - self.P, 1))),
            sigma_u=float(self.sig_u) if self.use_u else 0.0, cov_z=cov_z,
            n_runs={f: int(np.sum(f_idx == i)) for i, f in enumerate(fams)},
            n_runs_source={s: int(n_src[i]) for i, s in enumerate(sources)}, loglik=loglik)


def fit_group(rows: Rows, log_t: np.ndarray, *, playbook: bool, em_rounds: int = 4,
              start: GroupFit | None = None, fixed_sigma: GroupFit | None = None,
              free: tuple[str, ...] = PARAMETERS, balance: float = 0.0,
              pool_configs: float = POOL_CONFIGS_PER_PARAMETER) -> GroupFit:
    """Fit one group (module docstring). ``start``: warm start; ``fixed_sigma``: hold the
    residual sds and sigma_u of that fit (one solve; for refits without a few runs); ``free``:
    the parameters fitted (the others held at ``OFF``); ``balance``: each run weighted by
    (mean runs per source / runs of its source)^balance; ``pool_configs``: m_0 of the family
    prior per fitted parameter (``family_prior_sd``)."""
    problem = _GroupProblem(rows, log_t, playbook=playbook, start=start, fixed_sigma=fixed_sigma,
                            free=free, balance=balance, pool_configs=pool_configs)
    x = _start_vector(problem.prior, problem.fams, problem.sources, start, problem.use_delta,
                      problem.use_u)
    rounds = 1 if fixed_sigma is not None else em_rounds
    res = None
    for _ in range(rounds):
        res, x = problem.solve(x)
        if fixed_sigma is not None:
            break
        problem.update_sigmas(x)
    assert res is not None
    return problem.result(x, res)


def distinct_configs(rows: Rows, f_idx: np.ndarray, n_families: int) -> np.ndarray:
    """Per family (position in ``f_idx``), its distinct configurations as the step function
    sees them: model shape, layout, batch, schedule and chip (holdout.config_keys' fields less
    the source). Runs that repeat one configuration (a layout measured on several releases)
    count once."""
    c = rows.config
    cols = [np.asarray(x, float) for x in (
        c.params, c.active_params, c.n_layers, c.d_model, rows.n_accelerators, c.tp, c.pp, c.cp,
        c.ep, c.dp, c.microbatch_tokens, c.batch_tokens, c.zero_stage, c.recompute,
        c.virtual_pipeline, rows.peak_flops_per_s)] + [np.asarray(f_idx, float)]
    table = np.column_stack(cols) if f_idx.size else np.zeros((0, len(cols)))
    # NaN (a field a run leaves unset) compares equal to itself here, as a key of its own
    table = np.where(np.isnan(table), -1.0, table)
    unique = np.unique(table, axis=0)
    return np.bincount(unique[:, -1].astype(int), minlength=n_families).astype(float)


def family_prior_sd(configs: np.ndarray, n_free: int,
                    pool_configs: float = POOL_CONFIGS_PER_PARAMETER) -> np.ndarray:
    """Per family, the prior sd of its deviation from the population (logistic units):
    ``FAMILY_SD`` x sqrt(m / (m + m_0)), m its distinct configurations, m_0 = ``pool_configs``
    x ``n_free`` (module docstring; Gelman & Hill 2007 §12.5: the group estimate is pulled to
    the population as its own data thin). ``pool_configs`` 0: ``FAMILY_SD`` for every family."""
    m = np.asarray(configs, float)
    m0 = max(pool_configs, 0.0) * n_free
    if m0 == 0.0:
        return np.full(m.shape, FAMILY_SD)
    return FAMILY_SD * np.sqrt(m / (m + m0))


def _positions(values: np.ndarray, names: list[str]) -> np.ndarray:
    """Each value's position in ``names`` (an int array, empty too)."""
    where = {name: i for i, name in enumerate(names)}
    return np.array([where[v] for v in values.tolist()], dtype=np.int64)


def source_effects(a: np.ndarray, b: np.ndarray, s_idx: np.ndarray, n_sources: int,
                   sig_u: float) -> np.ndarray:
    """Each source's effect u minimising, for given family values, its share of the robust
    objective: sum over its runs of Huber(a_i - b_i u) plus Huber(u / sig_u), Huber with
    threshold ``HUBER_K`` (scipy's ``loss="huber"``, ``f_scale=HUBER_K``), where a_i is the
    run's weighted residual before the effect and b_i its weight over the source's sd. The
    objective is convex in u, its derivative g(u) = -sum b_i psi(a_i - b_i u) + psi(u/sig_u)
    / sig_u nondecreasing (psi: the residual clipped to +-HUBER_K), and its root lies between 0
    and the runs' a_i / b_i: bisection of that bracket, all sources at once, to the last bit
    (a finite-difference Jacobian divides by steps of ~1e-8)."""
    order = np.argsort(s_idx, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(s_idx[order]) != 0])
    ratio = (a / b)[order]
    lo = np.minimum(np.minimum.reduceat(ratio, starts), 0.0)
    hi = np.maximum(np.maximum.reduceat(ratio, starts), 0.0)
    for _ in range(1100):   # halvings from a bracket of ~1e308 to adjacent floats at ~1e-308
        mid = 0.5 * (lo + hi)
        if np.all((mid == lo) | (mid == hi) | np.isnan(mid)):   # no float left between ends
            break
        psi = np.clip(a - b * mid[s_idx], -HUBER_K, HUBER_K)
        g = np.clip(mid / sig_u, -HUBER_K, HUBER_K) / sig_u \
            - np.bincount(s_idx, weights=b * psi, minlength=n_sources)
        up = g > 0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return 0.5 * (lo + hi)


def _solve(resid: Any, x: np.ndarray, jac: Any, n_sources: int) -> Any:
    """scipy's robust trust-region solve of one EM round. Its dense step takes LAPACK's
    divide-and-conquer SVD (gesdd) of the scaled Jacobian, which on some ill-conditioned
    Jacobians stops with "SVD did not converge" (seen on 2,296 generated step-log runs of 417
    campaigns whose logs print the same numbers: ``benchmarks.scale_data.small_logs`` with a
    layout in each campaign's sidecar). Then the same problem is solved again with each
    parameter scaled by its Jacobian column's norm (``x_scale="jac"``): the same objective,
    another path; on that case it reached the optimum the SVD-free ``lsmr`` step and LAPACK's
    other SVD (gesvd) reach, to 1e-5 in the parameters (log-likelihood 6222.986 against
    6222.996 and 6222.984)."""
    options = dict(jac=jac, loss="huber", f_scale=HUBER_K, method="trf", xtol=1e-8, ftol=1e-8,
                   gtol=1e-8, max_nfev=200)
    try:
        return least_squares(resid, x, x_scale=1.0, **options)
    except np.linalg.LinAlgError as exc:
        print(f"calibrate: warning: {exc} in a trust-region step ({x.size} parameters, "
              f"{n_sources} sources); solved again with the parameters scaled by the "
              "Jacobian's columns", file=sys.stderr)
        return least_squares(resid, x, x_scale="jac", **options)


def _forward_step(x: np.ndarray) -> np.ndarray:
    """The step of scipy's 2-point differences (``scipy.optimize._numdiff``, no bounds):
    sqrt(eps) max(1, |x|), signed as x (+ at 0)."""
    sign = (x >= 0).astype(float) * 2 - 1
    return np.finfo(np.float64).eps ** 0.5 * sign * np.maximum(1.0, np.abs(x))


def _start_vector(prior: np.ndarray, fams: list[str], sources: list[str],
                  start: GroupFit | None, use_delta: bool, use_u: bool) -> np.ndarray:
    """The solver's first x = (z_pop, family deviations, source effects): the priors and
    zeros, or a previous fit's values (warm start)."""
    P = prior.size
    x = np.concatenate([prior, np.zeros(len(fams) * P if use_delta else 0),
                        np.zeros(len(sources) if use_u else 0)])
    if start is not None:
        x[:P] = start.z_pop
        if not use_delta and len(fams) == 1 and fams[0] in start.z_family:
            x[:P] = start.z_family[fams[0]]   # one family left (a refit without the others)
        if use_delta:
            for i, f in enumerate(fams):
                x[P + i * P:P + (i + 1) * P] = start.z_family.get(f, start.z_pop) - start.z_pop
        if use_u:
            x[P + (len(fams) * P if use_delta else 0):] = [start.u.get(s, 0.0) for s in sources]
    return x


def _covariances(jac: np.ndarray, fams: list[str], use_delta: bool) -> dict[str, np.ndarray]:
    """Covariance of z_pop and of each family's z_pop + delta_f, from the Gauss-Newton Hessian
    J'J of the solve (the inverse of the observed information of a least-squares fit). With
    the source effects profiled out (many sources) J holds the family columns only, so J'J is
    the Schur complement of the source block: its inverse is the family block of the full
    inverse."""
    P = len(PARAMETERS)
    cov = np.linalg.pinv(jac.T @ jac)
    cov_z = {"population": cov[:P, :P]}
    for i, f in enumerate(fams):
        if use_delta:
            sl = slice(P + i * P, P + (i + 1) * P)
            cov_z[f] = cov[:P, :P] + cov[sl, sl] + cov[:P, sl] + cov[sl, :P]
        else:
            cov_z[f] = cov[:P, :P]
    return cov_z


def is_playbook(rows: Rows) -> np.ndarray:
    return rows.family == PLAYBOOK
