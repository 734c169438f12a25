"""The dataset release: a versioned, self-describing bundle of the runs (``scalewall release``,
the DVC stage ``release``). See docs/dataset.md."""
