"""What the Playbook's repeat noise would allow a perfect layout ranker (docs/theory.md §10.6,
"Playbook ranking"). Prints the median over the ranking's (model, N) groups of the Spearman
correlation and the regret of a predictor that knows each layout's measured MFU, scored
against a second measurement drawn with the family's repeat noise
(``families.PLAYBOOK_NOISE_FLOOR`` in log), as the 5th, 50th and 95th percentile over 200
draws. Reads the shipped outputs (``make report`` first)::

    .venv/bin/python scripts/playbook_noise_floor.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.calibrate.families import PLAYBOOK_NOISE_FLOOR  # noqa: E402
from pipeline.calibrate.ranking import ranked_groups  # noqa: E402

SOURCE = "ultrascale_playbook2025"
DRAWS = 200


def groups() -> list[np.ndarray]:
    """Log measured MFU of each (model, N) group the ranking scores (``ranked_groups``)."""
    c = pd.read_parquet(ROOT / "data/processed/calibrated.parquet")
    runs = pd.read_parquet(ROOT / "data/processed/runs.parquet")
    return [np.log(g["measured_mfu"].to_numpy(float))
            for _, g in ranked_groups(c, runs, SOURCE)]


def main() -> None:
    rng = np.random.default_rng(0)
    truth = groups()
    spearman, regret = [], []
    for _ in range(DRAWS):
        s, r = [], []
        for t in truth:
            m = t + rng.normal(0.0, PLAYBOOK_NOISE_FLOOR, t.size)
            s.append(spearmanr(t, m).statistic)
            r.append(np.exp(m.max() - m[int(np.argmax(t))]) - 1.0)
        spearman.append(np.median(s))
        regret.append(np.median(r))
    for name, values in (("median Spearman", spearman), ("median regret", regret)):
        p5, p50, p95 = np.percentile(values, [5, 50, 95])
        print(f"{name}: {p50:.2f} (5-95 %: {p5:.2f}-{p95:.2f}) over {len(truth)} groups, "
              f"log-sd {PLAYBOOK_NOISE_FLOOR:.2f}")


if __name__ == "__main__":
    main()
