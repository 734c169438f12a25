"""BLAS threads per stage, set deliberately instead of left to the library's default.

The stages' linear algebra is many small problems (a least-squares fit of a series has tens of
points and a handful of parameters; the theory's cost model is element-wise numpy), where a
multi-threaded BLAS gains nothing and OpenBLAS's idle threads spin: on a busy 2-core machine,
the fit stage on the shipped data took 28.9 CPU-s and 94 s with OpenBLAS's default threads
against 22.5 CPU-s and 36 s with one (``benchmarks/bench_scale.py`` prints each stage's
CPU-seconds). Parallel work is done by processes where it pays (the ingest's step-log
workers), never by BLAS threads. ``SCALEWALL_BLAS_THREADS`` overrides the number for every
stage (for a machine where one large solve would gain from threads).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

# Threads a stage's BLAS may use; a stage not named uses DEFAULT_BLAS_THREADS.
DEFAULT_BLAS_THREADS = 1
STAGE_BLAS_THREADS: dict[str, int] = {}
# What OpenBLAS, MKL and OpenMP read when they load.
_ENV = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def blas_threads(stage: str) -> int:
    """The BLAS threads for ``stage`` (``SCALEWALL_BLAS_THREADS`` first, when set)."""
    override = os.environ.get("SCALEWALL_BLAS_THREADS", "").strip()
    if override.isdigit() and int(override) >= 1:
        return int(override)
    return STAGE_BLAS_THREADS.get(stage, DEFAULT_BLAS_THREADS)


@contextlib.contextmanager
def stage_threads(stage: str) -> Iterator[int]:
    """Run the body with BLAS limited to ``blas_threads(stage)`` threads: the libraries loaded
    so far through threadpoolctl, those loaded meanwhile through their environment variables.
    Worker processes started meanwhile keep the limit."""
    n = blas_threads(stage)
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update({k: str(n) for k in _ENV})  # read by a BLAS loaded meanwhile (scipy's)
    try:
        with threadpool_limits(limits=n, user_api="blas"):
            yield n
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
