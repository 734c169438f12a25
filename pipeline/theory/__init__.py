"""Data-movement limits to training (Erdil & Schneider-Joseph 2024), reconstructed.

Public API: :func:`evaluate` (validated, vectorised step cost of configurations),
:func:`pipeline.theory.search.search` (frontier over training compute) and the ``theory`` stage
(:mod:`pipeline.theory.stage`). Equations and sources: ``docs/theory.md``.
"""

from __future__ import annotations

from pipeline.theory.cost import COMPONENTS, StepCost, step_cost
from pipeline.theory.inputs import Constants, Hardware, Layout, Shape, validate


def evaluate(hw: Hardware, shape: Shape, layout: Layout, batch_tokens, const: Constants,
             strict_divisibility: bool = True) -> StepCost:
    """Validate the configurations (ValueError naming the field), then cost them."""
    validate(hw, shape, layout, strict_divisibility=strict_divisibility)
    return step_cost(hw, shape, layout, batch_tokens, const)


__all__ = ["COMPONENTS", "Constants", "Hardware", "Layout", "Shape", "StepCost", "evaluate",
           "step_cost", "validate"]
