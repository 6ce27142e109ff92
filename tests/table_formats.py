"""The table formats the tests run on (Iceberg, Delta): the Spark settings a session needs for
each (the same a user puts in the profile's server_side_parameters, docs/configuration.md, "Table formats"),
and the class path that makes their jars (`make jars`: .jars/iceberg, .jars/delta) visible to
every Spark JVM the tests start."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

JARS = Path(__file__).resolve().parent.parent / ".jars"
FORMATS = ("iceberg", "delta")

SESSION_SETTINGS: Dict[str, Dict[str, str]] = {
    "iceberg": {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
        "spark.sql.catalog.spark_catalog.type": "hive",
        # The tests' metastore is Spark's embedded Derby one: it has neither the lock tables
        # Iceberg's Hive commits take a lock in, nor BoneCP for Iceberg's own metastore client,
        # nor the schema version Hive's client checks unless told not to, as Spark's own does.
        # (One dbt run at a time per model is the adapter's own lock, run_lock.py.) With a
        # metastore service, `spark.sql.catalog.spark_catalog.uri` names it instead.
        "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
        "spark.hadoop.datanucleus.connectionPoolingType": "None",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    },
    "delta": {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Delta rebuilds a table's state with a shuffle of 50 partitions by default: far too
        # many for the tests' tables of a few rows on two cores.
        "spark.databricks.delta.snapshotPartitions": "2",
    },
}


def class_path() -> str:
    """Both formats' jars, for a JVM's class path (Java expands the `dir/*` entries)."""
    return os.pathsep.join(str(JARS / name / "*") for name in FORMATS)


def put_jars_on_class_path() -> None:
    """Make every Spark JVM started by pyspark in this process (and in the dbt processes it
    starts) load both formats' jars: a session's catalog and extensions are read when it
    starts, and a JVM's class path cannot grow after."""
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if "--driver-class-path" not in args:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-class-path {class_path()} {args}"
