"""Data-movement limits to training (Erdil & Schneider-Joseph 2024), reconstructed.

Public API: :func:`pipeline.theory.cost.evaluate` (validated, vectorised step cost of
configurations), :func:`pipeline.theory.search.search` (frontier over training compute) and the
``theory`` stage (:mod:`pipeline.theory.stage`). Equations and sources: ``docs/theory.md``.

This ``__init__`` imports nothing, so that importing ``pipeline.theory.contract`` (which later
stages do) does not pull in the cost model.
"""
