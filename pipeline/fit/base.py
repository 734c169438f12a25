"""What every scaling law provides to the fitting engine, and the series context it may need.

A law is a small object with a closed-form model ``X(N; theta)``, box bounds on ``theta``, a
linearised ordinary-least-squares start (each module says which linearisation) and the law's own
derived figures (``n_peak``, ``x_max``). The engine (:mod:`pipeline.fit.nls`) does the rest.

Laws are fitted on throughput normalised by its geometric mean, ``y_n = y / y_ref``, so that the
optimiser and the covariance see parameters of order one whatever the unit (tokens/s, FLOP/s,
1/s). ``Law.scales`` maps normalised parameters back to original units: ``theta = d * theta_n``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


class LawFitError(ValueError):
    """A series that cannot be fitted at all (NaN, zero throughput, too few distinct N...).

    The message says why; the fit stage turns it into a row with ``converged = False``.
    """


@dataclass(frozen=True)
class SeriesContext:
    """Facts about a series that some laws need.

    Attributes
    ----------
    scaling:
        ``strong`` (fixed global batch) or ``weak`` (batch grows with N). Only ``comm`` uses it:
        under weak scaling the per-step work grows with N, so its ``t_work/N`` term drops.
    work_per_step:
        Units of ``y`` per optimizer step (strong scaling) or per step and accelerator (weak
        scaling), e.g. global batch tokens when ``y`` is tokens/s. With it, ``comm``'s terms are
        seconds; without it (None) they are seconds per unit of ``y``-work.
    """

    scaling: str = "strong"
    work_per_step: float | None = None


class Law:
    """Base class; subclasses set the class attributes and implement ``model`` and ``initial``."""

    name: ClassVar[str]
    #: default names of the parameters, in order
    param_names: ClassVar[tuple[str, ...]]

    def names(self, ctx: SeriesContext) -> tuple[str, ...]:
        return self.param_names

    def bounds(self, ctx: SeriesContext) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds on the normalised parameters."""
        k = len(self.names(ctx))
        return np.zeros(k), np.full(k, np.inf)

    def scales(self, y_ref: float, ctx: SeriesContext) -> np.ndarray:
        """Per-parameter factor from normalised to original units."""
        raise NotImplementedError

    def model(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        """Throughput at ``n`` accelerators (normalised units)."""
        raise NotImplementedError

    def jacobian(self, n: np.ndarray, theta: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        """d model / d theta, shape (len(n), len(theta)), analytic (normalised units)."""
        raise NotImplementedError

    def initial(self, n: np.ndarray, y: np.ndarray, ctx: SeriesContext) -> np.ndarray:
        """Starting values from a linearised OLS fit (normalised units)."""
        raise NotImplementedError

    def derived(self, params: dict[str, float], ctx: SeriesContext) -> dict[str, float]:
        """The law's own figures (original units), e.g. USL's peak concurrency."""
        return {}


def clip_inside(theta: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Clip a start into the box, strictly inside where the box is open (``least_squares`` needs it)."""
    theta = np.where(np.isfinite(theta), theta, lower + 1e-6)
    hi = upper.astype(float).copy()
    finite = np.isfinite(hi)
    hi[finite] -= 1e-9 * np.maximum(1.0, np.abs(hi[finite]))
    return np.clip(theta, lower, hi)
