"""The Kafka log system: every module that knows a Kafka client's API (kafka-python,
confluent-kafka) lives here, so the rest of the adapter reaches Kafka only through the
log_system interface (`get_log_system("kafka")`, by its name in log_system.BUILT_IN) and another
log system could plug in beside it. Nothing is imported here: kafka-python stays off the import
path of models without a log."""
