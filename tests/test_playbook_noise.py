"""The Playbook family's residual sd floor is its measured repeat noise per measurement: the
pooled log-sd of the configurations the sweep measured more than once, about their means
(``families.PLAYBOOK_NOISE_FLOOR``), a configuration being what the step model sees
(``holdout.config_keys``). A sample sd of repeats already estimates one measurement's sd;
dividing it by sqrt(2) (the sd of a difference of two) understated it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.calibrate.estimate import bare_model, load_data
from pipeline.calibrate.families import PLAYBOOK_NOISE_FLOOR
from pipeline.calibrate.holdout import config_keys
from pipeline.config import PROJ_ROOT
from tests.step_rows import CATALOG, LATENCY
from tests.workspace import shipped_mark


def pooled_repeat_sd(log_y: np.ndarray, keys: np.ndarray) -> tuple[float, int, int]:
    """(pooled sd about each key's mean, its degrees of freedom, keys with repeats)."""
    frame = pd.DataFrame({"key": keys, "y": log_y})
    g = frame.groupby("key")["y"]
    repeated = (g.transform("size") > 1).to_numpy()
    dev = (frame["y"] - g.transform("mean"))[repeated]
    groups = int(frame.loc[repeated, "key"].nunique())
    dof = int(repeated.sum()) - groups
    return float(np.sqrt((dev ** 2).sum() / dof)), dof, groups


def test_pooled_sd_of_pairs_is_one_measurements_sd():
    rng = np.random.default_rng(0)
    sigma, pairs = 0.3, 20_000
    sd, dof, n = pooled_repeat_sd(rng.normal(0.0, sigma, 2 * pairs),
                                  np.repeat(np.arange(pairs), 2))
    assert (dof, n) == (pairs, pairs)
    assert abs(sd - sigma) < 0.01  # not sigma / sqrt(2)


@shipped_mark("data/processed/runs.parquet")
def test_floor_is_the_shipped_playbook_repeat_noise(catalog):
    runs = pd.read_parquet(PROJ_ROOT / "data/processed/runs.parquet")
    playbook = runs[runs["source"] == "ultrascale_playbook2025"]
    data = load_data(playbook, bare_model(catalog, CATALOG, LATENCY, True, 128.0))
    measured = data.measured_mfu > 0
    sd, dof, configs = pooled_repeat_sd(np.log(data.measured_mfu[measured]),
                                        config_keys(data)[measured])
    assert (configs, dof) == (15, 17)
    assert abs(sd - PLAYBOOK_NOISE_FLOOR) < 0.005
