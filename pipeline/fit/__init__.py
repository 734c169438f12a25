"""Scaling laws for throughput against accelerator count, and their fits.

``fit(n, y, law="usl")`` is the one entry point; see ``LAWS`` for the law names. Each law lives
in its own module with its formula and source in the docstring; :mod:`pipeline.fit.nls` is the
estimation engine, :mod:`pipeline.fit.result` the result object and its inference;
:mod:`pipeline.fit.stage` is the DVC fit stage (extrapolation tests in
:mod:`pipeline.fit.extrapolation`, MFU regressions in :mod:`pipeline.fit.crossseries`).

Considered and left out: Gustafson's law ``X = lam * (alpha + (1 - alpha) * N)`` is affine in
N; on weak-scaling series Amdahl (sigma near 0) and the power law (b near 1) already describe a
near-linear rise, so it would add a parameter without a new shape. A critical-batch-size law
(McCandlish et al. 2018, arXiv 1812.06162) would explain MLPerf time-to-train through the extra
samples a larger batch needs, but runs.parquet carries no samples-to-converge to fit it on.
"""

from __future__ import annotations

from pipeline.fit import amdahl, comm, power, usl
from pipeline.fit.base import Law, LawFitError, SeriesContext
from pipeline.fit.nls import SCALES, fit_law
from pipeline.fit.result import FitResult

LAWS: dict[str, Law] = {m.LAW.name: m.LAW for m in (power, amdahl, usl, comm)}

__all__ = ["LAWS", "SCALES", "FitResult", "Law", "LawFitError", "SeriesContext", "fit", "get_law"]


def get_law(name: str) -> Law:
    """The law called ``name``; an unknown name is a ``KeyError`` listing the known ones."""
    try:
        return LAWS[name]
    except KeyError:
        raise KeyError(f"unknown law {name!r}; known: {', '.join(sorted(LAWS))}") from None


def fit(n: object, y: object, law: str = "usl", *, scale: str = "log",
        scaling: str = "strong", work_per_step: float | None = None) -> FitResult:
    """Fit one law to throughput ``y`` measured at ``n`` accelerators.

    Parameters
    ----------
    n, y:
        Accelerator counts and throughput (any unit; repeated N are fine: every point counts).
    law:
        ``power``, ``amdahl``, ``usl`` or ``comm`` (see ``LAWS``).
    scale:
        ``log`` (least squares on log y: multiplicative errors; the default, as the fit
        stage's ``fit.scale``) or ``linear`` (on y, as R's ``usl``). AICc/BIC are on the
        original y either way, so they compare across both.
    scaling, work_per_step:
        Series context for ``comm`` (see :class:`SeriesContext`).

    Returns
    -------
    FitResult
        ``params``, ``stderr``, ``conf_int()``, ``predict(n, interval)``, ``aicc``, ``bic``,
        ``residuals``, ``converged`` and ``note``.

    Raises
    ------
    LawFitError
        Input that cannot be fitted: NaN/inf, throughput <= 0, N < 1, fewer distinct N than
        parameters, or no residual degrees of freedom.
    """
    return fit_law(get_law(law), n, y, scale=scale,
                   ctx=SeriesContext(scaling=scaling, work_per_step=work_per_step))
