"""The Playbook family's residual sd floor is its measured repeat noise per measurement: the
pooled log-sd of the configurations the sweep measured more than once, about their means
(``families.PLAYBOOK_NOISE_FLOOR``). A sample sd of repeats already estimates one
measurement's sd; dividing it by sqrt(2) (the sd of a difference of two) understated it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.families import PLAYBOOK_NOISE_FLOOR
from pipeline.config import PROJ_ROOT
from tests.workspace import shipped_mark

# what makes two Playbook rows one configuration: the model, the chips and the whole layout
CONFIG = ["model", "n_accelerators", "tp", "pp", "dp", "micro_batch", "zero_stage", "seq_len",
          "global_batch_tokens"]


def pooled_repeat_sd(log_y: pd.Series, groups: pd.DataFrame) -> tuple[float, int, int]:
    """(pooled sd about each group's mean, its degrees of freedom, groups with repeats)."""
    frame = groups.assign(_y=log_y.to_numpy())
    g = frame.groupby(list(groups.columns), dropna=False)["_y"]
    n = g.transform("size")
    rep = frame[n > 1]
    dev = rep["_y"] - g.transform("mean")[n > 1]
    dof = int(len(rep) - rep.groupby(list(groups.columns), dropna=False).ngroups)
    return float(np.sqrt((dev ** 2).sum() / dof)), dof, int(len(rep) - dof)


def test_pooled_sd_of_pairs_is_one_measurements_sd():
    rng = np.random.default_rng(0)
    sigma, pairs = 0.3, 20_000
    y = pd.Series(rng.normal(0.0, sigma, 2 * pairs))
    groups = pd.DataFrame({"config": np.repeat(np.arange(pairs), 2)})
    sd, dof, n = pooled_repeat_sd(y, groups)
    assert (dof, n) == (pairs, pairs)
    assert abs(sd - sigma) < 0.01  # not sigma / sqrt(2)


@shipped_mark("data/processed/runs.parquet")
def test_floor_is_the_shipped_playbook_repeat_noise():
    runs = pd.read_parquet(PROJ_ROOT / "data/processed/runs.parquet")
    p = runs[(runs["source"] == "ultrascale_playbook2025") & (runs["mfu"] > 0)]
    sd, dof, configs = pooled_repeat_sd(np.log(p["mfu"].astype(float)), p[CONFIG])
    assert (configs, dof) == (15, 17)
    assert abs(sd - PLAYBOOK_NOISE_FLOOR) < 0.005
