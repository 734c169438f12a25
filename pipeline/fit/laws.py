"""The fit stage's law registry and its one entry point, :func:`fit`.

Each law lives in its own module with its formula and source in the docstring
(:mod:`pipeline.fit.power`, :mod:`~pipeline.fit.amdahl`, :mod:`~pipeline.fit.usl`,
:mod:`~pipeline.fit.comm`); :mod:`pipeline.fit.nls` is the estimation engine.
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
