"""The log's life after it is written: whether the log a table recorded is still the log Kafka
holds (identity.py: topics deleted or recreated, a new cluster, confirmations or records lost,
retention past the table's complete copy), the log's generations that re-base it on the table
(generations.py), and what a topic's settings keep (retention.py)."""
