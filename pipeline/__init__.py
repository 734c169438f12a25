"""scalewall: measured diminishing returns of distributed training against data-movement limits."""

__version__ = "0.1.0"
