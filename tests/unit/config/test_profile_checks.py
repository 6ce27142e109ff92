"""Every profile field checked when a connection opens (issue 44, item 2): one sentence naming
the field and the profile; and a failed statement reported by Spark's one-line cause."""
import pytest

from dbt.adapters.logstore.connections import session_defaults, spark_cause
from dbt.adapters.logstore.credentials import LogstoreCredentials
from dbt.adapters.logstore.config.profile_checks import ProfileFieldError, check_profile

WHERE = "of the profile 'shop' (target 'dev'): "


def creds(**fields):
    return LogstoreCredentials.from_dict({"method": "session", "schema": "s", **fields})


@pytest.mark.parametrize("fields, says", [
    ({"kafka_bootstrap_servers": "127.0.0.1:90x2"},
     "Field kafka_bootstrap_servers " + WHERE + "'127.0.0.1:90x2': the port '90x2' is not a "
     "number from 1 to 65535."),
    ({"kafka_bootstrap_servers": ""},
     "Field kafka_bootstrap_servers " + WHERE + "'' is empty: give host:port[,host:port], e.g. "
     "127.0.0.1:9092."),
    ({"kafka_bootstrap_servers": "SASL_SSL://broker:9093"},
     "Field kafka_bootstrap_servers " + WHERE + "'SASL_SSL://broker:9093' has a scheme "
     "('SASL_SSL://'): give host:port without it, e.g. broker:9093."),
    ({"kafka_client": "confluant"},
     "Field kafka_client " + WHERE + "'confluant' is not a Kafka client: give kafka-python or "
     "confluent (confluent needs pip install 'dbt-logstore[confluent]')."),
    ({"kafka_properties": {"securty.protocol": "SSL"}},
     "Field kafka_properties " + WHERE + "unknown Kafka client property 'securty.protocol': "
     "kafka-python has no such property. Did you mean 'security.protocol'?"),
    ({"lock_lease_seconds": -5},
     "Field lock_lease_seconds " + WHERE + "-5 is not a number of seconds above 0: give e.g. 600."),
    ({"engine_output": "quiet"},
     "Field engine_output " + WHERE + "'quiet' is not one of file, console: give file (Spark's "
     "output in logs/dbt-logstore-engine.log) or console."),
])
def test_a_bad_field_is_one_sentence_naming_it_and_the_profile(fields, says):
    with pytest.raises(ProfileFieldError) as info:
        check_profile(creds(**fields), "shop", "dev")
    assert info.value.msg == says


def test_good_fields_pass():
    check_profile(creds(kafka_bootstrap_servers="a:9092, [::1]:9093", kafka_client="confluent",
                        kafka_properties={"linger.ms": "5"}, lock_lease_seconds=30,
                        engine_output="console"), "shop", "dev")


def test_engine_output_file_turns_progress_bars_off_and_keeps_derby_in_the_engine_log(tmp_path):
    log = tmp_path / "logs" / "dbt-logstore-engine.log"
    quiet = session_defaults(str(tmp_path / "spark"), log)
    assert quiet["spark.ui.showConsoleProgress"] == "false"
    assert f"-Dderby.stream.error.file={log}" in quiet["spark.driver.extraJavaOptions"]
    console = session_defaults(str(tmp_path / "spark"))  # engine_output: console
    assert "spark.ui.showConsoleProgress" not in console
    assert "derby.stream.error.file" not in console["spark.driver.extraJavaOptions"]


class CapturedLike(Exception):
    desc = "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012\n== SQL (line 1, position 8) ==\n"


@pytest.mark.parametrize("exc, cause", [
    (CapturedLike(), "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012"),
    (RuntimeError("An error occurred while calling o42.sql.\n: org.apache.spark.SparkException: "
                  "Job aborted.\n\tat org.apache.spark.scheduler.DAGScheduler.failJob"),
     "org.apache.spark.SparkException: Job aborted."),
    (RuntimeError("Runtime Error\n  [TABLE_OR_VIEW_NOT_FOUND] x\n'Project [*]"),
     "[TABLE_OR_VIEW_NOT_FOUND] x"),
])
def test_spark_cause_is_its_first_line(exc, cause):
    assert spark_cause(exc) == cause


def test_a_thrift_servers_answer_gives_its_error_message():
    class Status:
        errorMessage = "Error running query: [TABLE_OR_VIEW_NOT_FOUND] t\n'UnresolvedRelation [t]"

    class Response:
        status = Status()

    assert spark_cause(Exception(Response())) == "Error running query: [TABLE_OR_VIEW_NOT_FOUND] t"


def test_a_python_workers_failure_gives_its_exception_line():
    class PythonExceptionLike(Exception):
        desc = ("\n  An exception was thrown from the Python worker. Please see the stack trace below."
                "\nTraceback (most recent call last):\n  File \"x.py\", line 1, in f\n    boom()\n"
                "ValueError: the partition's records were refused\n")

    assert spark_cause(PythonExceptionLike()) == "ValueError: the partition's records were refused"
