"""Estimation of the calibrated step-time model: a two-level nonlinear least-squares fit.

Model (docs/theory.md §10), for run i of source s:

    log(1/MFU_i) = log(T_i / t_compute_i) = u_s + log(sum_j theta_j x_ij) + e_i,
    e_i ~ N(0, sigma_s^2),  u_s ~ N(0, sigma_u^2)

``x_ij`` are the regressors of :mod:`pipeline.calibrate.features` (ideal component times over
the ideal compute time), ``theta_j > 0`` the efficiencies (fitted as ``log theta_j``), ``u_s``
the source's software effect (a random intercept on log step time), ``sigma_s`` the residual
spread of each source. Estimation is penalised least squares (the mode of the joint density,
as in a Gaussian mixed model's BLUP equations) with ``sigma_s`` and ``sigma_u`` updated between
solves (EM updates, ``n_iter`` rounds); parameter covariance from the Gauss-Newton Hessian of
the augmented system, or cluster-robust (sandwich by series) when clusters are given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import norm

# Prior weight (in runs) of the pooled residual variance in each source's variance: keeps a
# source with 1-3 runs from getting a zero variance and an infinite weight.
VARIANCE_PRIOR_RUNS = 5.0
# A term contributing less than this share of every run's time is dropped as having no effect.
DEAD_TERM_SHARE = 1e-4
MIN_CLUSTERS_FOR_ROBUST = 20


@dataclass
class Calibration:
    """A fitted model. ``log_theta`` and ``u`` are the estimates; ``cov`` their covariance
    (order: log_theta, then u)."""

    terms: list[str]
    log_theta: np.ndarray
    sources: list[str]
    u: np.ndarray
    cov: np.ndarray
    sigma_source: dict[str, float]
    sigma_pool: float
    sigma_u: float
    n_runs: int
    n_runs_source: dict[str, int]
    n_runs_term: dict[str, int]
    loglik: float
    dropped: list[str] = field(default_factory=list)
    stderr_kind: str = "model"
    #: terms no fitted run exercises (all regressors zero), held at the ideal theory's 1
    fixed: dict[str, float] = field(default_factory=dict)

    @property
    def all_terms(self) -> list[str]:
        """The columns :meth:`predict_log_time` expects: fitted terms, then fixed ones."""
        return list(self.terms) + list(self.fixed)

    @property
    def start(self) -> np.ndarray:
        """log theta over ``all_terms``: a warm start for refits of the same form."""
        return np.concatenate([self.log_theta, np.log(list(self.fixed.values()) or np.ones(0))])

    @property
    def theta(self) -> np.ndarray:
        return np.exp(self.log_theta)

    @property
    def n_params(self) -> int:
        """Free parameters for AICc/BIC: efficiencies plus variance parameters."""
        return len(self.terms) + len(self.sigma_source) + (1 if len(self.sources) > 1 else 0)

    @property
    def aicc(self) -> float:
        k, n = self.n_params, self.n_runs
        return float(2 * k - 2 * self.loglik + (2 * k * (k + 1) / (n - k - 1) if n > k + 1
                                                 else np.inf))

    @property
    def bic(self) -> float:
        return float(self.n_params * np.log(self.n_runs) - 2 * self.loglik)

    def stderr_log_theta(self) -> np.ndarray:
        p = len(self.terms)
        return np.sqrt(np.maximum(np.diag(self.cov)[:p], 0.0))

    def source_effect(self, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(u, index into u or -1) per run; unseen sources get u = 0 (the population)."""
        lookup = {s: i for i, s in enumerate(self.sources)}
        idx = np.array([lookup.get(s, -1) for s in sources], dtype=int)
        u = np.where(idx >= 0, self.u[np.maximum(idx, 0)] if len(self.u) else 0.0, 0.0)
        return u, idx

    def components(self, x: np.ndarray) -> np.ndarray:
        """theta_j x_ij for the columns ``all_terms``: each term's calibrated time relative to
        t_compute (before u_s)."""
        theta = np.concatenate([self.theta, np.array(list(self.fixed.values()), float)])
        return x * theta[None, :]

    def predict_log_time(self, x: np.ndarray, sources: np.ndarray, *, population: bool = False
                         ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of log(1/MFU) for new runs of ``sources``.

        The sd includes the parameters' uncertainty (delta method), the source's residual
        spread, and for a source the fit has not seen (or ``population``) the between-source
        spread sigma_u with the pooled residual spread.
        """
        comp = self.components(x)
        f = comp.sum(axis=1)
        u, idx = self.source_effect(np.asarray(sources, dtype=object))
        if population:
            u, idx = np.zeros_like(u), np.full_like(idx, -1)
        mean = u + np.log(f)
        p, s = len(self.terms), len(self.sources)
        grad = np.zeros((len(f), p + s))
        grad[:, :p] = comp[:, :p] / f[:, None]
        seen = idx >= 0
        grad[np.nonzero(seen)[0], p + idx[seen]] = 1.0
        var_par = np.einsum("ij,jk,ik->i", grad, self.cov, grad)
        sig = np.array([self.sigma_source.get(src, self.sigma_pool) for src in sources])
        var_new = np.where(seen, sig ** 2, self.sigma_pool ** 2 + self.sigma_u ** 2)
        return mean, np.sqrt(var_par + var_new)

    def predict_mfu(self, x: np.ndarray, sources: np.ndarray, interval: float = 0.95, *,
                    population: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(predicted MFU, pi_low, pi_high, sd of log) for new runs."""
        mean, sd = self.predict_log_time(x, sources, population=population)
        z = norm.ppf(0.5 + interval / 2)
        return np.exp(-mean), np.exp(-(mean + z * sd)), np.exp(-(mean - z * sd)), sd

    def parameter_table(self, interval: float = 0.95) -> list[dict]:
        """Rows of calibration.parquet: every term, the source effects and the variances."""
        z = norm.ppf(0.5 + interval / 2)
        se = self.stderr_log_theta()
        rows = []
        for j, term in enumerate(self.terms):
            est = float(self.theta[j])
            rows.append(dict(parameter=term, group="efficiency", estimate=est,
                             stderr=est * float(se[j]),  # delta method on exp(log theta)
                             ci_low=float(np.exp(self.log_theta[j] - z * se[j])),
                             ci_high=float(np.exp(self.log_theta[j] + z * se[j])),
                             n_runs=int(self.n_runs_term.get(term, 0))))
        for term, value in self.fixed.items():
            rows.append(dict(parameter=term, group="efficiency_fixed", estimate=float(value),
                             stderr=np.nan, ci_low=np.nan, ci_high=np.nan, n_runs=0))
        for term in self.dropped:
            rows.append(dict(parameter=term, group="efficiency", estimate=0.0, stderr=np.nan,
                             ci_low=np.nan, ci_high=np.nan,
                             n_runs=int(self.n_runs_term.get(term, 0))))
        p = len(self.terms)
        for i, src in enumerate(self.sources):
            se_u = float(np.sqrt(max(self.cov[p + i, p + i], 0.0)))
            rows.append(dict(parameter=f"u[{src}]", group="source_effect",
                             estimate=float(self.u[i]), stderr=se_u,
                             ci_low=float(self.u[i] - z * se_u), ci_high=float(self.u[i] + z * se_u),
                             n_runs=int(self.n_runs_source[src])))
        for src, sig in self.sigma_source.items():
            rows.append(dict(parameter=f"sigma[{src}]", group="residual_sd", estimate=float(sig),
                             stderr=np.nan, ci_low=np.nan, ci_high=np.nan,
                             n_runs=int(self.n_runs_source[src])))
        rows.append(dict(parameter="sigma_pool", group="residual_sd", estimate=self.sigma_pool,
                         stderr=np.nan, ci_low=np.nan, ci_high=np.nan, n_runs=self.n_runs))
        rows.append(dict(parameter="sigma_u", group="between_source_sd", estimate=self.sigma_u,
                         stderr=np.nan, ci_low=np.nan, ci_high=np.nan, n_runs=self.n_runs))
        return rows


def _initial(x: np.ndarray, log_y: np.ndarray) -> np.ndarray:
    """Start: compute term near the typical 1/MFU, every other term at ~5% of the step."""
    start = np.empty(x.shape[1])
    for j in range(x.shape[1]):
        pos = x[:, j][x[:, j] > 0]
        start[j] = np.log(0.05 / np.median(pos)) if pos.size else 0.0
    start[0] = np.median(log_y) - np.log(1.25)
    return start


def _gauss_newton(resid, jac, par: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  max_iter: int = 30) -> np.ndarray:
    """Projected Gauss-Newton with step halving, for warm-started refits (a few rows left out
    of a converged fit): the normal equations are small (terms + sources), so this is much
    faster than a trust-region solve and reaches the same optimum from nearby."""
    r = resid(par)
    cost = float(r @ r)
    for _ in range(max_iter):
        j = jac(par)
        step = np.linalg.lstsq(j.T @ j + 1e-12 * np.eye(par.size), -j.T @ r, rcond=None)[0]
        t = 1.0
        while t > 1e-4:
            trial = np.clip(par + t * step, lo, hi)
            r_new = resid(trial)
            c_new = float(r_new @ r_new)
            if c_new <= cost:
                break
            t /= 2.0
        else:
            break
        done = cost - c_new <= 1e-12 * max(cost, 1.0)
        par, r, cost = trial, r_new, c_new
        if done:
            break
    return par


def fit(x: np.ndarray, log_y: np.ndarray, sources: np.ndarray, terms: list[str], **kw
        ) -> Calibration:
    """Fit (see :func:`_fit`); a term whose regressor is zero on every run cannot be estimated
    and is held at 1 (the ideal theory's time counts in full), so that runs of a regime no
    fitted run has seen (e.g. TP across nodes) are still charged for it."""
    x = np.asarray(x, float)
    idle = [j for j in range(1, x.shape[1]) if not np.any(x[:, j] > 0)]
    if not idle:
        return _fit(x, log_y, sources, terms, **kw)
    keep = [j for j in range(x.shape[1]) if j not in idle]
    start = kw.pop("start", None)
    if start is not None and len(start) == x.shape[1]:
        start = np.asarray(start)[keep]
    result = _fit(x[:, keep], log_y, sources, [terms[j] for j in keep], start=start, **kw)
    result.fixed = {terms[j]: 1.0 for j in idle}
    result.n_runs_term.update({terms[j]: 0 for j in idle})
    return result


def _fit(x: np.ndarray, log_y: np.ndarray, sources: np.ndarray, terms: list[str], *,
        clusters: np.ndarray | None = None, n_iter: int = 6, start: np.ndarray | None = None,
        sigma_fixed: tuple[dict[str, float], float] | None = None,
        prune: bool = True, balance: float = 0.0) -> Calibration:
    """Fit ``log_y = log(1/MFU)`` on regressors ``x`` (columns = ``terms``, the first must be
    ``compute``) with a random effect per value of ``sources``.

    ``start``: initial log theta (warm start for refits); ``sigma_fixed``: (sigma per source,
    sigma_u) held fixed instead of re-estimated (fast refits, one solve); ``clusters``: labels for
    cluster-robust standard errors (used when there are at least 20 clusters); ``balance``:
    a in [0, 1], each run weighted by (mean runs per source / runs of its source)^a, so that a
    source with many runs does not set the efficiencies alone (0: every run counts the same).
    The compute term is held >= 1 (no arithmetic above peak).
    """
    x = np.asarray(x, float)
    log_y = np.asarray(log_y, float)
    sources = np.asarray(sources, dtype=object)
    levels = sorted(set(sources.tolist()))
    s_idx = np.array([levels.index(s) for s in sources])
    n, p, S = x.shape[0], x.shape[1], len(levels)
    use_u = S > 1
    n_src = np.bincount(s_idx, minlength=S)
    # Balance weights as a variance multiplier per run: sigma_i = sigma_s / sqrt(w_i).
    bal = np.sqrt((n_src.mean() / n_src[s_idx]) ** balance)
    phi = _initial(x, log_y) if start is None else np.asarray(start, float).copy()
    u = np.zeros(S)
    if sigma_fixed is not None:
        sig_s = np.array([sigma_fixed[0].get(s, np.nan) for s in levels])
        sig_s = np.where(np.isfinite(sig_s), sig_s, np.nanmedian(sig_s) if np.isfinite(sig_s).any()
                         else 0.3)
        sig_u = float(sigma_fixed[1])
    else:
        sig_s = np.full(S, max(float(np.std(log_y)), 1e-3))
        sig_u = 0.3 if use_u else 0.0

    def resid(par):
        th = np.exp(par[:p])
        f = x @ th
        uu = par[p:] if use_u else np.zeros(S)
        r = (log_y - uu[s_idx] - np.log(f)) * bal / sig_s[s_idx]
        return np.concatenate([r, uu / sig_u]) if use_u else r

    def jac(par):
        th = np.exp(par[:p])
        comp = x * th[None, :]
        f = comp.sum(axis=1)
        w = bal / sig_s[s_idx]
        top = -(comp / f[:, None]) * w[:, None]
        if not use_u:
            return top
        ju = np.zeros((n, S))
        ju[np.arange(n), s_idx] = -w
        bottom = np.hstack([np.zeros((S, p)), np.eye(S) / sig_u])
        return np.vstack([np.hstack([top, ju]), bottom])

    rounds = 1 if sigma_fixed is not None else n_iter
    par = np.concatenate([phi, u]) if use_u else phi
    lo = np.full(par.size, -np.inf)
    hi = np.full(par.size, np.inf)
    lo[:p] = -60.0
    hi[:p] = 30.0
    if terms and terms[0] == "compute":
        lo[0] = 0.0
        par[0] = max(par[0], 1e-6)
    for _ in range(rounds):
        if start is not None and sigma_fixed is not None:
            par = _gauss_newton(resid, jac, par, lo, hi)
        else:
            par = least_squares(resid, par, jac=jac, bounds=(lo, hi), method="trf",
                                x_scale="jac", xtol=1e-10, ftol=1e-10, gtol=1e-10,
                                max_nfev=200).x
        th = np.exp(par[:p])
        uu = par[p:] if use_u else np.zeros(S)
        e = log_y - uu[s_idx] - np.log(x @ th)
        if sigma_fixed is not None:
            break
        pool = float(np.sum(e ** 2) / max(n - p, 1))
        ss = np.bincount(s_idx, weights=e ** 2, minlength=S)
        sig_s = np.sqrt((ss + VARIANCE_PRIOR_RUNS * pool) / (n_src + VARIANCE_PRIOR_RUNS))
        if use_u:
            j = jac(par)
            cov_u = np.diag(np.linalg.pinv(j.T @ j))[p:]
            sig_u = float(np.sqrt(max(np.mean(uu ** 2 + cov_u), 1e-8)))

    comp = x * np.exp(par[:p])[None, :]
    share = comp / comp.sum(axis=1, keepdims=True)
    dead = [j for j in range(1, p) if np.nanmax(share[:, j], initial=0.0) < DEAD_TERM_SHARE]
    n_term = {t: int(np.sum(x[:, j] > 0)) for j, t in enumerate(terms)}
    if prune and dead:
        keep = [j for j in range(p) if j not in dead]
        result = _fit(x[:, keep], log_y, sources, [terms[j] for j in keep], clusters=clusters,
                     n_iter=n_iter, start=par[keep], sigma_fixed=sigma_fixed, prune=True,
                     balance=balance)
        result.dropped = sorted(set(result.dropped) | {terms[j] for j in dead})
        result.n_runs_term.update({terms[j]: n_term[terms[j]] for j in dead})
        return result

    th = np.exp(par[:p])
    uu = par[p:] if use_u else np.zeros(S)
    e = log_y - uu[s_idx] - np.log(x @ th)
    j = jac(par)
    bread = np.linalg.pinv(j.T @ j)
    cov, kind = bread, "model"
    if clusters is not None and len(set(clusters.tolist())) >= MIN_CLUSTERS_FOR_ROBUST:
        r = resid(par)
        labels, c_idx = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
        score = j[:n] * r[:n, None]
        per = np.zeros((labels.size, j.shape[1]))
        np.add.at(per, c_idx, score)
        meat = per.T @ per
        if use_u:
            pen = j[n:] * r[n:, None]
            meat += pen.T @ pen
        # CR1 small-sample factor G/(G-1) (N-1)/(N-K), as Stata's vce(cluster)
        g_n, k_n = labels.size, j.shape[1]
        cov = bread @ meat @ bread * g_n / (g_n - 1) * (n - 1) / max(n - k_n, 1)
        kind = "cluster"
    sig_i = sig_s[s_idx] / bal
    loglik = float(-0.5 * np.sum(np.log(2 * np.pi * sig_i ** 2) + e ** 2 / sig_i ** 2))
    pool = float(np.sqrt(np.sum(e ** 2) / max(n - p, 1)))
    return Calibration(
        terms=list(terms), log_theta=par[:p], sources=levels if use_u else [],
        u=uu if use_u else np.zeros(0), cov=cov if use_u else cov[:p, :p],
        sigma_source={s: float(sig_s[i]) for i, s in enumerate(levels)}, sigma_pool=pool,
        sigma_u=float(sig_u) if use_u else 0.0, n_runs=n,
        n_runs_source={s: int(n_src[i]) for i, s in enumerate(levels)}, n_runs_term=n_term,
        loglik=loglik, stderr_kind=kind)
