"""Connection manager: dbt-spark's, with safe defaults for the local session method."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict

from dbt.adapters.spark.connections import SparkConnectionManager, SparkConnectionMethod


def session_defaults(session_dir: str) -> Dict[str, str]:
    """Spark settings for a local session that binds to loopback only, shows no UI and keeps
    its warehouse, metastore and derby.log under `session_dir` instead of the current directory."""
    session_dir = os.path.abspath(session_dir)
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": os.path.join(session_dir, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(session_dir, 'metastore_db')};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={session_dir}",
    }


class LogstoreConnectionManager(SparkConnectionManager):
    TYPE = "logstore"

    def __init__(self, profile: Any, mp_context: Any) -> None:
        super().__init__(profile, mp_context)
        creds = profile.credentials
        if creds.method == SparkConnectionMethod.SESSION:
            if not creds.session_dir:
                root = getattr(profile, "project_root", None) or os.getcwd()
                target = getattr(profile, "target_path", None) or "target"
                creds.session_dir = os.path.join(root, target, "logstore_spark")
            for key, value in session_defaults(creds.session_dir).items():
                creds.server_side_parameters.setdefault(key, value)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # Spark's Python workers (parallel mirror, reading upstream changes) run dbt's own
            # interpreter, which has this package and kafka-python, not the first `python3`.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
