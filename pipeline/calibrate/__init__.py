"""The data-movement model calibrated to the measured runs (stage ``calibrate``).

features: regressors from runs and bounds; model: the two-level fit; forms: model selection;
holdout and intervals: out-of-sample predictions and their intervals; scores: summaries.
"""
