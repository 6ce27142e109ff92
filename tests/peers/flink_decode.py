"""Decode Kafka record values with Apache Flink's own formats (flink-json): from files, or read from
the topic itself by Flink's Kafka connector (`--jar`).

Run with the interpreter of a virtual environment that has `apache-flink` (make: .venv-flink),
never imported by the test process:

    python flink_decode.py [--jar JAR ...] JOB.json RESULT.json
    python flink_decode.py [--jar JAR ...] --serve   (jobs as lines "JOB.json<TAB>RESULT.json" on stdin)

JOB.json is a list of cases:
    {"name": str, "format": "debezium-json" | "json",
     "columns": [[name, flink_sql_type], ...], "options": {format option: value, ...},
     "path": file with one record value per line}
or, without "path", a table whose "options" are the whole WITH clause, e.g. Flink's Kafka
connector reading a topic itself (tests/functional/test_live_flink.py); its jar is given with
--jar and goes to `pipeline.jars`. Either kind may name "primary_key": [column, ...].
RESULT.json maps each case name to
    {"rows": [[row kind, [value, ...]], ...]}   row kind: "+I", "-U", "+U" or "-D"
or  {"error": "<the text of Flink's exception and its causes>"}.
A failing case does not stop the others. One Flink (one JVM) decodes all cases, in streaming
mode with parallelism 1, so the rows come in the order of the lines of the file. An empty line
stands for a tombstone (null value): Flink's debezium-json skips it, as it skips a tombstone
read from Kafka (the harness self-test in tests/functional/test_peer_flink.py checks this).

Values are made JSON-safe in one canonical form, read from the Java objects Flink hands out
(not from PyFlink's Python conversion, which rounds timestamps through floats and cannot take
a NaN FLOAT):
    DECIMAL           string of the exact value, plain notation ("0.0000001000")
    FLOAT, DOUBLE     number; NaN and infinities as "NaN", "Infinity", "-Infinity"
    TIMESTAMP_LTZ     "yyyy-MM-ddTHH:mm:ss.ffffffZ", the instant in UTC
    TIMESTAMP         "yyyy-MM-ddTHH:mm:ss.ffffff", wall clock
    DATE              "yyyy-MM-dd"
    BYTES             base64 (standard alphabet, padded)
    ARRAY             list;  MAP  object (keys as strings);  ROW  object by field name
"""
import base64
import json
import math
import os
import shutil
import sys
import time
import traceback
from datetime import datetime, timezone
from decimal import Decimal

# Flink's session zone and the JVM's default zone are UTC: nothing here depends on the machine's.
os.environ["TZ"] = "UTC"
time.tzset()

if not os.environ.get("JAVA_HOME"):
    java = shutil.which("java")
    if java:  # .../bin/java -> the JDK directory
        os.environ["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))


def _float(value):
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _instant(text):
    # java.time.Instant.toString(): "2024-01-01T00:00:00Z", fractions only when non-zero
    moment = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _local(text):
    # java.time.LocalDateTime.toString(): "2024-01-01T00:00", seconds and fractions when non-zero
    return datetime.fromisoformat(text).isoformat(timespec="microseconds")


def to_json(value, data_type):
    """A Java value of Flink's external type for `data_type` (a PyFlink DataType), JSON-safe."""
    from pyflink.table import types as T

    if value is None:
        return None
    if isinstance(data_type, T.DecimalType):  # py4j hands a BigDecimal out as a Decimal
        return format(value, "f") if isinstance(value, Decimal) else value.toPlainString()
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return _float(float(value))
    if isinstance(data_type, T.LocalZonedTimestampType):
        return _instant(value.toString())
    if isinstance(data_type, T.TimestampType):
        return _local(value.toString())
    if isinstance(data_type, (T.DateType, T.TimeType)):
        return value.toString()
    if isinstance(data_type, (T.BinaryType, T.VarBinaryType)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(data_type, T.ArrayType):
        return [to_json(v, data_type.element_type) for v in value]
    if isinstance(data_type, T.MapType):
        out = {}
        for k in value.keySet():
            key = to_json(k, data_type.key_type)
            out[key if isinstance(key, str) else json.dumps(key)] = to_json(
                value.get(k), data_type.value_type)
        return out
    if isinstance(data_type, T.RowType):
        return {field.name: to_json(value.getField(i), field.data_type)
                for i, field in enumerate(data_type.fields)}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value  # BOOLEAN, integers, STRING: py4j hands them out as Python values


def error_text(exc):
    """Flink's exception and its causes, one line each, without the stack frames: the
    innermost cause first (what went wrong), then the whole chain, outermost first."""
    java = getattr(exc, "java_exception", None)
    if java is not None:  # py4j.protocol.Py4JJavaError
        lines = []
        while java is not None and len(lines) < 20:
            lines.append(java.toString())
            java = java.getCause()
    else:  # pyflink.util.exceptions.JavaException carries the Java stack trace as text
        lines = [line.strip() for line in str(exc).splitlines()
                 if line.strip() and not line.lstrip().startswith(("at ", "... "))]
    if not lines:
        return "".join(traceback.format_exception(exc))
    if len(lines) == 1:
        return lines[0]
    return lines[-1] + "\n  the exception chain, outermost first:\n  " + "\n  ".join(lines)


def quote(name):
    return "`" + name.replace("`", "``") + "`"


def literal(text):
    return "'" + str(text).replace("'", "''") + "'"


class Decoder:
    """One JVM, one Flink mini cluster for all the jobs, and a streaming TableEnvironment that
    submits to it (a new mini cluster per job, PyFlink's local default, costs ~1 s each)."""

    def __init__(self, jars=()):
        from pyflink.common import Configuration
        from pyflink.java_gateway import get_gateway
        from pyflink.table import EnvironmentSettings, TableEnvironment

        jvm = get_gateway().jvm
        cluster_conf = jvm.org.apache.flink.configuration.Configuration()
        for key, value in {"rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1",
                           "rest.bind-port": "0"}.items():
            cluster_conf.setString(key, value)
        minicluster = jvm.org.apache.flink.runtime.minicluster
        self._cluster = minicluster.MiniCluster(
            minicluster.MiniClusterConfiguration.Builder().setConfiguration(cluster_conf)
            .setNumTaskManagers(1).setNumSlotsPerTaskManager(64).build())
        self._cluster.start()
        rest = self._cluster.getRestAddress().get()
        conf = Configuration()
        for key, value in {"execution.target": "remote", "rest.address": rest.getHost(),
                           "rest.port": str(rest.getPort()),
                           # one task per job: rows come out in the order of the file's lines
                           "parallelism.default": "1",
                           "table.local-time-zone": "UTC"}.items():
            conf.set_string(key, value)
        self._t_env = TableEnvironment.create(
            EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build())
        if jars:
            # PyFlink's own route: the jars join this JVM's context class loader (the planner
            # finds the connector factories there) and each job's jars on the cluster
            self._t_env.get_config().set(
                "pipeline.jars", ";".join("file://" + os.path.abspath(j) for j in jars))
        self._tables = 0

    def decode(self, cases):
        """Submit every case's job, then collect each one's changelog (the jobs run meanwhile)."""
        from pyflink.table.types import _from_java_data_type

        started = {}
        results = {}
        for case in cases:
            try:
                self._tables += 1
                table = f"logstore_case_{self._tables}"
                if "path" in case:
                    options = {"connector": "filesystem", "path": case["path"], "format": case["format"]}
                    options.update(case.get("options") or {})
                else:
                    options = dict(case["options"])
                # the case's own table settings (e.g. 'table.exec.source.cdc-events-duplicate'),
                # for its job only: the planner reads them as the SELECT is planned
                config = self._t_env.get_config()
                for key, value in (case.get("config") or {}).items():
                    config.set(key, value)
                columns = [f"{quote(n)} {t}" for n, t in case["columns"]]
                if case.get("primary_key"):
                    columns.append("PRIMARY KEY (" + ", ".join(map(quote, case["primary_key"]))
                                   + ") NOT ENFORCED")
                self._t_env.execute_sql(
                    f"CREATE TEMPORARY TABLE {table} (" + ", ".join(columns) + ") WITH ("
                    + ", ".join(f"{literal(k)} = {literal(v)}" for k, v in options.items()) + ")")
                started[case["name"]] = self._t_env.execute_sql(f"SELECT * FROM {table}")
                self._t_env.execute_sql(f"DROP TEMPORARY TABLE {table}")
                for key in case.get("config") or {}:
                    config.set(key, DEFAULT_CONFIG.get(key, "false"))
            except Exception as exc:  # a bad type or option: this case only
                results[case["name"]] = {"error": error_text(exc)}
        for name, result in started.items():
            try:
                j_result = result._j_table_result
                j_types = j_result.getResolvedSchema().getColumnDataTypes()
                # PyFlink's DataTypes only to walk the values (ROW field names, element types)
                types = [_from_java_data_type(j_types.get(i)) for i in range(j_types.size())]
                rows = []
                # The Java iterator itself: its Rows hold Java values (BigDecimal, Instant, ...)
                iterator = j_result.collect()
                try:
                    while iterator.hasNext():
                        row = iterator.next()
                        rows.append([row.getKind().shortString(),
                                     [to_json(row.getField(i), t) for i, t in enumerate(types)]])
                finally:
                    iterator.close()
                results[name] = {"rows": rows}
            except Exception as exc:  # Flink failed to read this case's records
                results[name] = {"error": error_text(exc)}
        return {case["name"]: results[case["name"]] for case in cases}

    def warm_up(self):
        """One small job, so that the first real one does not pay for loading the planner
        and the format (~10 s)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="flink-warm-up-") as directory:
            path = os.path.join(directory, "warm-up.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                f.write('{"before":null,"after":{"id":1,"at":"2024-01-01 00:00:00.000000Z"},"op":"c"}\n')
            self.decode([{"name": "warm-up", "format": "debezium-json", "path": path,
                          "columns": [["id", "INT"], ["at", "TIMESTAMP_LTZ(6)"]]}])

    def close(self):
        self._cluster.close()


# what a case's own setting goes back to after its job (Flink's defaults)
DEFAULT_CONFIG = {"table.exec.source.cdc-events-duplicate": "false"}


def run_job(decoder, job_path, result_path):
    with open(job_path, encoding="utf-8") as f:
        cases = json.load(f)
    try:
        results = decoder.decode(cases)
    except Exception as exc:  # e.g. the JVM went away: every case says so
        text = error_text(exc)
        results = {case["name"]: {"error": text} for case in cases}
    with open(result_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)
    os.replace(result_path + ".tmp", result_path)  # the result file appears complete


def main(argv):
    jars = []
    while argv[1:2] == ["--jar"] and len(argv) > 2:
        jars.append(argv[2])
        argv = argv[:1] + argv[3:]
    if argv[1:] == ["--serve"]:
        # One line per job on stdin: "JOB.json<TAB>RESULT.json"; the result file appears (by
        # rename) when the job is done. End of input ends the process.
        decoder = Decoder(jars)
        decoder.warm_up()  # while the tests prepare their first jobs
        try:
            for line in sys.stdin:
                if line.strip():
                    job_path, result_path = line.rstrip("\n").split("\t")
                    run_job(decoder, job_path, result_path)
        finally:
            decoder.close()
    elif len(argv) == 3:
        decoder = Decoder(jars)
        try:
            run_job(decoder, argv[1], argv[2])
        finally:
            decoder.close()
    else:
        sys.exit(f"usage: {argv[0]} [--jar JAR ...] JOB.json RESULT.json | {argv[0]} [--jar JAR ...] --serve")


if __name__ == "__main__":
    main(sys.argv)
