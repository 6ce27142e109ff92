"""Session defaults: loopback only, no UI, warehouse and metastore out of the current directory."""
import os
from types import SimpleNamespace

from dbt.adapters.logstore.connections import LogstoreConnectionManager, session_defaults
from dbt.adapters.logstore.credentials import LogstoreCredentials
from dbt.mp_context import get_mp_context


def _profile(**creds):
    credentials = LogstoreCredentials.from_dict({"method": "session", "schema": "s", **creds})
    return SimpleNamespace(credentials=credentials, project_root="/proj", target_path="target")


def test_session_needs_no_host():
    assert LogstoreCredentials.from_dict({"method": "session", "schema": "s"}).host == "localhost"


def test_session_dir_defaults_under_target():
    profile = _profile()
    LogstoreConnectionManager(profile, get_mp_context())
    params = profile.credentials.server_side_parameters
    assert profile.credentials.session_dir == os.path.join("/proj", "target", "logstore_spark")
    assert params["spark.sql.warehouse.dir"] == "/proj/target/logstore_spark/warehouse"
    assert "databaseName=/proj/target/logstore_spark/metastore_db" in \
        params["spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert params["spark.driver.bindAddress"] == "127.0.0.1"
    assert params["spark.ui.enabled"] == "false"
    assert "-Dderby.system.home=/proj/target/logstore_spark" in params["spark.driver.extraJavaOptions"]


def test_explicit_settings_win():
    profile = _profile(session_dir="/elsewhere",
                       server_side_parameters={"spark.ui.enabled": "true"})
    LogstoreConnectionManager(profile, get_mp_context())
    params = profile.credentials.server_side_parameters
    assert params["spark.ui.enabled"] == "true"
    assert params["spark.sql.warehouse.dir"] == "/elsewhere/warehouse"


def test_thrift_gets_no_session_defaults():
    profile = _profile(method="thrift", host="127.0.0.1", port=10000)
    LogstoreConnectionManager(profile, get_mp_context())
    assert "spark.sql.warehouse.dir" not in profile.credentials.server_side_parameters


def test_secrets_are_not_connection_keys():
    creds = LogstoreCredentials.from_dict({"method": "session", "schema": "s",
                                           "kafka_properties": {"sasl.plain.password": "hunter2"}})
    assert "kafka_properties" not in creds._connection_keys()
    assert creds.type == "logstore"


def test_session_defaults_are_absolute():
    assert os.path.isabs(session_defaults("rel")["spark.sql.warehouse.dir"])
