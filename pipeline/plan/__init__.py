"""``scalewall plan``: for a model on an accelerator at N chips, the best parallel layouts that
fit in memory, with the calibrated MFU and its interval, memory per chip and what limits it.

Reads the catalogs and the pipeline's outputs (``calibration.parquet`` through
:func:`pipeline.calibrate.step.load_model`, the memory overhead from the theory metrics); it
fits nothing.
"""
