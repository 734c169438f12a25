"""Scaling laws for throughput against accelerator count, and their fits.

``pipeline.fit.laws.fit(n, y, law="usl")`` is the one entry point; see ``pipeline.fit.laws.LAWS`` for
the law names. Each law lives
in its own module with its formula and source in the docstring; :mod:`pipeline.fit.nls` is the
estimation engine, :mod:`pipeline.fit.result` the result object and its inference;
:mod:`pipeline.fit.stage` is the DVC fit stage (extrapolation tests in
:mod:`pipeline.fit.extrapolation`, MFU regressions in :mod:`pipeline.fit.crossseries`).

Considered and left out: Gustafson's law ``X = lam * (alpha + (1 - alpha) * N)`` is affine in
N; on weak-scaling series Amdahl (sigma near 0) and the power law (b near 1) already describe a
near-linear rise, so it would add a parameter without a new shape. A critical-batch-size law
(McCandlish et al. 2018, arXiv 1812.06162) would explain MLPerf time-to-train through the extra
samples a larger batch needs, but runs.parquet carries no samples-to-converge to fit it on.

This ``__init__`` imports nothing, so that importing ``pipeline.fit.contract`` (which every later
stage does) does not pull in the laws and their estimation engine.
"""
