"""Stage 4, the log: the pluggable LogSystem interface (log_system.py) and its control records,
the log's life (lifecycle/: generations, identity, retention), and Kafka, the implementation
(kafka/, the only place that names a Kafka client). Record formats are in ../formats/."""
