"""Stage 1, configuration: a model's log options (their vocabulary, readers and reference), the
typed LogConfig resolved from them, what a continuing log keeps, where its servers came from,
and the profile's own fields."""
