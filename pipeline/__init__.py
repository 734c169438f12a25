"""scalewall: measured diminishing returns of distributed training against data-movement limits."""

from pipeline.kernels import pin as _pin_kernels

__version__ = "0.1.0"

# Before anything imports numpy: the same floating-point kernels on every x86-64 machine, so
# `dvc repro` writes the same bytes wherever it runs (pipeline/kernels.py).
_pin_kernels()
