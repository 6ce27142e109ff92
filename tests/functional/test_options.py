"""The log option surface, each option's effect on the topic checked against a real broker."""
import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.functional.dbt_helpers import failure_text, logstore_statuses
from tests.functional.contract import assert_contract, read_topic, spark, table_properties


def _run(step=1, expect_pass=True):
    return run_dbt(["run", "--vars", f"{{step: {step}}}"], expect_pass=expect_pass)




CUSTOMERS = """
{{{{ config(materialized='table', unique_key='id', **{config}) }}}}
select * from values
{{% if var('step', 1) == 1 %}} (1, 'a'), (2, 'b'), (3, 'c')
{{% else %}} (1, 'a'), (2, 'B'), (4, 'd') {{% endif %}} as t(id, name)
"""


def customers(**config):
    return CUSTOMERS.format(config=json.dumps({"log.system": "kafka", **config}))


class TestChangelogModes:
    """auto with debezium-json (the default) is a Debezium change stream for keyed models too:
    before images, `d` events, and a marked tombstone after each keyed delete so a compacted
    topic forgets the key; json + upsert is upsert-kafka's shape."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "keyed_auto.sql": customers(**{"kafka.topic-config.cleanup.policy": "compact"}),
            "upsert_json.sql": customers(**{"log.format": "json", "log.changelog-mode": "upsert"}),
            "all_mode.sql": customers(**{"log.changelog-mode": "all"}),
        }

    def test_changelog_modes(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        for step in (1, 2):
            _run(step)
            assert_contract(kafka_bootstrap_servers, f"{schema}.keyed_auto", f"{schema}.keyed_auto")
            assert_contract(kafka_bootstrap_servers, f"{schema}.upsert_json", f"{schema}.upsert_json",
                            value_format="json")
            assert_contract(kafka_bootstrap_servers, f"{schema}.all_mode", f"{schema}.all_mode")

        for model in ("keyed_auto", "all_mode"):  # auto and all write the same records
            log = read_topic(kafka_bootstrap_servers, f"{schema}.{model}")
            update = next(m for m in log if m.value and m.envelope["op"] == "u")
            assert update.envelope["before"]["name"] == "b" and update.envelope["after"]["name"] == "B"
            deleted = [m for m in log if m.key == b'{"id":3}' and m.offset > 2]
            assert [m.op for m in deleted] == ["d", "d"]  # the `d` event, then the tombstone
            assert deleted[0].envelope["before"] == {"id": 3, "name": "c"}
            assert deleted[1].value is None and deleted[1].header("logstore.tombstone") == "after-delete"
            assert deleted[0].header("logstore.tombstone") is None
            assert table_properties(f"{schema}.{model}")["log.changelog-mode"] == "all"

        bare = read_topic(kafka_bootstrap_servers, f"{schema}.upsert_json")
        assert {"id": 1, "name": "a"} in [json.loads(m.value) for m in bare if m.value]  # the row itself
        tombstones = [m for m in bare if m.value is None]
        assert [m.key for m in tombstones] == [b'{"id":3}']  # the delete itself: no marker
        assert tombstones[0].header("logstore.tombstone") is None
        assert table_properties(f"{schema}.upsert_json")["log.changelog-mode"] == "upsert"

        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap_servers)
        try:
            topic = f"{schema}.keyed_auto"
            described = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
            assert described["topic"][topic]["cleanup.policy"]["value"] == "compact"
        finally:
            admin.close()


class TestJsonFormatRefusesWhatItCannotExpress:
    """Bare rows cannot express updates or deletes: refused at parse time for every model
    whose rows change, before anything is built."""

    REFUSED = {
        "bare": (customers(**{"log.format": "json", "log.changelog-mode": "all"}),
                 "'log.format' = 'json' writes bare rows"),
        "bare_keyless": ("{{ config(materialized='table', **{'log.system': 'kafka', "
                         "'log.format': 'json'}) }} select 1 as id",
                         "'log.format' = 'json' writes bare rows"),
        "upsert_dbz": (customers(**{"log.changelog-mode": "upsert"}),
                       "Flink's debezium-json cannot read"),
    }

    @pytest.fixture(scope="class")
    def models(self):
        return {"fine.sql": customers()}

    def test_refused_at_parse(self, project):
        models = Path(project.project_root) / "models"
        for name, (sql, reason) in self.REFUSED.items():
            (models / f"{name}.sql").write_text(sql, encoding="utf-8")
            out = failure_text(["parse"])
            assert f"Model '{name}'" in out and reason in out and "Allowed:" in out, out
            (models / f"{name}.sql").unlink()
        run_dbt(["parse"])


APPEND_JSON = """
{{ config(materialized='incremental', **{'log.system': 'kafka', 'log.format': 'json'}) }}
select * from values {% if var('step', 1) == 1 %} (1, 'a'), (2, 'b') {% else %} (3, 'c') {% endif %} as t(id, name)
{% if is_incremental() %} where id > (select max(id) from {{ this }}) {% endif %}
"""


class TestJsonAppendLog:
    """json without a key on an append-only model: a stream of rows (Flink's json format)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"appended.sql": APPEND_JSON}

    def test_json_append(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.appended"
        _run(1)
        _run(2)
        log = assert_contract(kafka_bootstrap_servers, relation, relation, value_format="json")
        assert sorted(json.loads(m.value)["id"] for m in log) == [1, 2, 3]
        out = failure_text(["run", "--full-refresh", "--vars", "{step: 2}"])  # rows 1, 2 would go
        assert "Model 'appended'" in out and "'log.format' = 'json'" in out and "Nothing was changed" in out
        assert_contract(kafka_bootstrap_servers, relation, relation, value_format="json")


PRE_04 = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select id, name, cast(at as timestamp) as at from values
{% if var('step', 1) == 1 %} (1, 'a', '2024-01-01 10:00:00'), (2, 'b', '2024-01-02 10:00:00'), (3, 'c', null)
{% else %} (1, 'a', '2024-01-01 10:00:00'), (2, 'B', '2024-05-01 12:30:00.5'), (4, 'd', null) {% endif %}
as t(id, name, at)
"""


class TestExistingLogKeepsItsShape:
    """The upgrade path: a table whose log was started by 0.1 (keyed debezium-json logs were
    then written in upsert mode, timestamps ISO-8601) goes on in that shape under the new
    defaults, with a warning that says how to move; a new topic takes the new defaults."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"legacy.sql": PRE_04}

    def test_upgrade(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.legacy"
        _run(1)
        # what a table logged by 0.1 records: mode upsert, no timestamp standard
        spark().sql(f"alter table {relation} set tblproperties ('log.changelog-mode' = 'upsert')")
        spark().sql(f"alter table {relation} unset tblproperties ('log.timestamp-format.standard')")
        before = read_topic(kafka_bootstrap_servers, relation)
        _, out = run_dbt_and_capture(["run", "--vars", "{step: 2}"])
        text = " ".join(out.split())
        assert "keeps the keyed shape it was started with" in text and "new 'kafka.topic'" in text
        assert "keeps writing ISO-8601 timestamps" in text
        log = assert_contract(kafka_bootstrap_servers, relation, relation)
        new = [m for m in log if (m.partition, m.offset) not in {(b.partition, b.offset) for b in before}]
        update = next(m for m in new if m.value and m.envelope["op"] == "u")
        assert update.envelope["before"] is None  # the shape its consumers already read
        assert update.envelope["after"]["at"] == "2024-05-01T12:30:00.500000Z"
        assert [m.value for m in new if m.key == b'{"id":3}'] == [None]  # delete = tombstone
        props = table_properties(relation)
        assert props["log.changelog-mode"] == "upsert" and props["log.timestamp-format.standard"] == "ISO-8601"
        # a new topic starts with the table's rows, in the current defaults
        (project.project_root / "models" / "legacy.sql").write_text(
            PRE_04.replace("log_system='kafka'", "log_system='kafka', kafka_topic='moved_' ~ this.schema"),
            encoding="utf-8")
        _, out = run_dbt_and_capture(["run", "--vars", "{step: 2}"])
        assert "keeps the keyed shape" not in out
        moved = assert_contract(kafka_bootstrap_servers, f"moved_{project.test_schema}", relation)
        assert {m.envelope["after"]["at"] for m in moved} == {
            "2024-01-01 10:00:00.000000Z", "2024-05-01 12:30:00.500000Z", None}
        assert table_properties(relation)["log.changelog-mode"] == "all"


class TestIgnoreDelete:
    @pytest.fixture(scope="class")
    def models(self):
        return {"no_deletes.sql": customers(**{"log.ignore-delete": True, "log.changelog-mode": "all"})}

    def test_ignore_delete(self, project, kafka_bootstrap_servers):
        topic = f"{project.test_schema}.no_deletes"
        _run(1)
        _run(2)
        ops = [m.op for m in read_topic(kafka_bootstrap_servers, topic)]
        assert sorted(ops) == ["c", "c", "c", "c", "u"]  # id 3's delete is not logged


MERGE = """
{{{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          file_format='{file_format}', **{{'log.system': 'kafka', 'log.changelog-mode': '{mode}'}}) }}}}
{{% set step = var('step', 1) %}}
select * from values
{{% if step == 1 %}} (1, 'a', 10), (2, 'b', 20)
{{% elif step == 2 %}} (2, 'b2', 21), (3, 'c', 30), (1, 'a', 10)
{{% else %}} (4, 'd', 40) {{% endif %}} as t(id, name, amount)
"""


class TestKeyedUpsertOnParquetAndOrc:
    """dbt-spark refuses `merge` on parquet/orc; the adapter upserts by rewriting."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "upsert_parquet.sql": MERGE.format(file_format="parquet", mode="all"),
            "upsert_orc.sql": MERGE.format(file_format="orc", mode="auto"),
        }

    def test_upserts(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        for step in (1, 2, 3):
            results = _run(step)
            for model in ("upsert_parquet", "upsert_orc"):
                name = f"{schema}.{model}"
                assert_contract(kafka_bootstrap_servers, name, name)
        rows = sorted(tuple(r) for r in spark().table(f"{schema}.upsert_parquet").collect())
        assert rows == [(1, "a", 10), (2, "b2", 21), (3, "c", 30), (4, "d", 40)]
        log = read_topic(kafka_bootstrap_servers, f"{schema}.upsert_parquet")
        ops = [(m.key.decode(), m.op) for m in log]
        assert sorted(ops[:2]) == [('{"id":1}', "c"), ('{"id":2}', "c")]  # step 1
        assert sorted(ops[2:4]) == [('{"id":2}', "u"), ('{"id":3}', "c")]  # step 2: id 1 unchanged
        assert ops[4:] == [('{"id":4}', "c")]                              # step 3
        response = next(r for r in results if r.node.name == "upsert_parquet").adapter_response
        # an upsert by rewrite counts no rows (as dbt-spark's merge): the records say what changed
        assert response.get("rows_affected") is None and response["rows_mirrored"] == 1
        assert response["topic"] == f"{schema}.upsert_parquet"
        ((partition, (first, last)),) = response["log_offsets"].items()
        assert partition == "0" and first == last == log[-1].offset


class TestPassThroughAndAmoroSpellings:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "amoro.sql": "{{ config(materialized='table', unique_key='id', **{'log-store.enabled': true, "
                         "'log-store.topic': 'amoro_' ~ this.schema, 'properties.linger.ms': '1'}) }} "
                         "select 1 as id",
            "tuned.sql": "{{ config(materialized='table', unique_key='id', **{'log.system': 'kafka', "
                         "'kafka.linger.ms': 2, 'kafka.transaction.timeout.ms': 30000, "
                         "'log.system.partitions': 2}) }} select 1 as id",
        }

    def test_options_reach_the_log(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        _run()
        assert_contract(kafka_bootstrap_servers, f"amoro_{schema}", f"{schema}.amoro")
        assert_contract(kafka_bootstrap_servers, f"{schema}.tuned", f"{schema}.tuned")
        assert table_properties(f"{schema}.tuned")["logstore.topic.partitions"] == "2"


class TestUnknownClientPropertyFailsBeforeChange:
    @pytest.fixture(scope="class")
    def models(self):
        return {"bad_prop.sql": "{{ config(materialized='table', **{'log.system': 'kafka', "
                                "'kafka.no.such.setting': 1}) }} select 1 as id"}

    def test_unknown_property(self, project):
        out = failure_text(["run"])
        assert "Model 'bad_prop'" in out and "'no.such.setting'" in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.bad_prop")


class TestUnknownLogKeyFailsAtParse:
    @pytest.fixture(scope="class")
    def models(self):
        return {"typo.sql": "{{ config(materialized='table', **{'log.system': 'kafka', "
                            "'log.sytem.partitions': 3}) }} select 1 as id"}

    def test_typo(self, project):
        out = failure_text(["parse"])
        assert "Model 'typo'" in out and "unknown config key 'log.sytem.partitions'" in out


class TestTopicWithFewerPartitionsFails:
    @pytest.fixture(scope="class")
    def models(self):
        return {"wide.sql": "{{ config(materialized='table', **{'log.system': 'kafka', "
                            "'kafka.topic': 'narrow_' ~ this.schema, 'log.system.partitions': 3}) }} "
                            "select 1 as id"}

    def test_fewer_partitions(self, project, kafka_bootstrap_servers):
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap_servers)
        admin.create_topics([NewTopic(f"narrow_{project.test_schema}", 1, 1)])
        admin.close()
        out = failure_text(["run"])
        assert "has 1 partitions but 'log.system.partitions' is 3" in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.wide")


def recreate_topic(servers, topic, partitions):
    """The topic deleted and created again with `partitions`, behind dbt's back."""
    import time

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.2)
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


class TestTopicWhosePartitionCountChangedFails:
    """Someone gives the topic more partitions between runs (here: deletes it and creates it
    again wider, as the embedded broker has no CreatePartitions): a key's next records would
    land in another partition than its earlier ones, so the run stops before the table changes."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"widened.sql": "{{ config(materialized='table', unique_key='id', **{'log.system': 'kafka', "
                               "'kafka.topic': 'widened_' ~ this.schema, 'log.system.partitions': 2, "
                               "'log.on-lost': var('on_lost', 'fail')}) }} "
                               "select id from range({{ var('rows', 3) }}) as r(id)"}

    def test_partition_count_changed(self, project, kafka_bootstrap_servers):
        run_dbt(["run"])
        topic = f"widened_{project.test_schema}"
        recreate_topic(kafka_bootstrap_servers, topic, 4)
        # a topic created again is no longer the table's log (lifecycle/identity.py) ...
        out = failure_text(["run", "--vars", json.dumps({"rows": 5})])
        assert f"the topic '{topic}' was deleted and created again" in out, out
        assert "Nothing was changed" in out
        relation = f"{project.test_schema}.widened"
        assert spark().table(relation).count() == 3  # the table did not change
        # ... and a log that goes on there still keeps its partition count
        out = failure_text(["run", "--vars", json.dumps({"rows": 5, "on_lost": "restart"})])
        assert ("Model 'widened': topic '" + topic + "' now has 4 partitions, but its records were "
                "written with 2") in out, out
        assert ("Ways out: log to a new 'kafka.topic' (with any partition count; it starts with "
                "the table's rows), or delete the topic, create it again with 2 partitions and run "
                "the model with 'log.on-lost: restart'") in out, out
        relation = f"{project.test_schema}.widened"
        assert spark().table(relation).count() == 3  # the table did not change
        # the second way out, as the sentence gives it: the topic again with 2 partitions
        recreate_topic(kafka_bootstrap_servers, topic, 2)
        run_dbt(["run", "--vars", json.dumps({"rows": 5, "on_lost": "restart"})])
        assert spark().table(relation).count() == 5
        statuses = logstore_statuses(project)
        assert statuses["widened"].agree, statuses["widened"].problems
        assert statuses["widened"].generation == 2


LATE = """
{{{{ config(materialized='table', unique_key='{key}'{log}) }}}}
select * from values {{% if var('step', 1) == 1 %}} (1, 'a') {{% else %}} (1, 'a'), (2, 'b') {{% endif %}} as t(id, name)
"""


class TestLogStartsWithTheTablesRows:
    """Enabling a log on an existing table writes its current rows first; changing the key of
    a continuing log is refused."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"late.sql": LATE.format(key="id", log="")}

    def test_late_log_and_key_change(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.late"
        _run(1)  # no log yet
        (project.project_root / "models" / "late.sql").write_text(
            LATE.format(key="id", log=", log_system='kafka'"), encoding="utf-8")
        _run(2)
        log = assert_contract(kafka_bootstrap_servers, relation, relation)
        assert sorted((m.key.decode(), m.op) for m in log) == [('{"id":1}', "c"), ('{"id":2}', "c")]
        (project.project_root / "models" / "late.sql").write_text(
            LATE.format(key="name", log=", log_system='kafka'"), encoding="utf-8")
        out = failure_text(["run", "--vars", "{step: 2}"])
        assert "'unique_key' changed from [id] to [name]" in out


class TestDebugChecksKafka:
    @pytest.fixture(scope="class")
    def models(self):
        return {"m.sql": "select 1 as id"}

    def test_debug(self, project, kafka_bootstrap_servers):
        _, out = run_dbt_and_capture(["debug"])
        assert f"Kafka at {kafka_bootstrap_servers}: reachable" in out
        assert "Kafka topics: creatable" in out
