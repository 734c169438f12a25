"""Fit every candidate model form on the same runs and pick one by AICc or BIC."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.features import x_matrix
from pipeline.calibrate.model import Calibration, fit


def fit_frame(frame: pd.DataFrame, terms: list[str], *, balance: float, em_rounds: int,
              start: np.ndarray | None = None, sigma_fixed=None) -> Calibration:
    """Fit ``terms`` on the runs of ``frame`` (rows of features.design with a measured MFU)."""
    return fit(x_matrix(frame, terms), np.log(1.0 / frame["measured_mfu"].to_numpy(float)),
               frame["source"].to_numpy(object), terms,
               clusters=frame["series_id"].astype(str).to_numpy(), n_iter=em_rounds,
               start=start, sigma_fixed=sigma_fixed, balance=balance)


def fit_forms(frame: pd.DataFrame, forms: dict[str, list[str]], criterion: str, *,
              balance: float, em_rounds: int) -> tuple[str, dict[str, Calibration], pd.DataFrame]:
    """(chosen form, every form's fit, table of form, terms kept, aicc, bic, in-sample median APE)."""
    fits, rows = {}, []
    for name, terms in forms.items():
        cal = fit_frame(frame, terms, balance=balance, em_rounds=em_rounds)
        fits[name] = cal
        mfu, *_ = cal.predict_mfu(x_matrix(frame, cal.all_terms), frame["source"].to_numpy(object))
        ape = np.abs(mfu / frame["measured_mfu"].to_numpy(float) - 1.0)
        rows.append(dict(form=name, terms=",".join(cal.terms), dropped=",".join(cal.dropped),
                         n_params=cal.n_params, loglik=cal.loglik, aicc=cal.aicc, bic=cal.bic,
                         median_ape=float(np.median(ape))))
    table = pd.DataFrame(rows)
    best = str(table.sort_values([criterion, "form"]).iloc[0]["form"])
    return best, fits, table
