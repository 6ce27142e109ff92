"""Stage 5, reading: the reader of a logged table's changelog, replay on the consumer's side,
downstream models reading an upstream's changes, status, and a dbt project seen from outside a
run (for the commands)."""
