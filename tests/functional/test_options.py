"""The log option surface, each option's effect on the topic checked against a real broker."""
import json

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.functional.dbt_helpers import failure_text
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


class TestUpsertChangelogMode:
    """auto = upsert for keyed models: no before images, deletes as tombstones, compactable."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "upsert_auto.sql": customers(**{"kafka.topic-config.cleanup.policy": "compact"}),
            "upsert_json.sql": customers(**{"log.format": "json", "log.changelog-mode": "upsert"}),
            "all_mode.sql": customers(**{"log.changelog-mode": "all"}),
        }

    def test_upsert_modes(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        for step in (1, 2):
            _run(step)
            assert_contract(kafka_bootstrap_servers, f"{schema}.upsert_auto", f"{schema}.upsert_auto")
            assert_contract(kafka_bootstrap_servers, f"{schema}.upsert_json", f"{schema}.upsert_json",
                            value_format="json")
            assert_contract(kafka_bootstrap_servers, f"{schema}.all_mode", f"{schema}.all_mode")

        upsert = {(m.key.decode(), m.offset): m for m in read_topic(kafka_bootstrap_servers, f"{schema}.upsert_auto")}
        deletes = [m for m in upsert.values() if m.key == b'{"id":3}' and m.value is None]
        assert len(deletes) == 1  # tombstone
        update = next(m for m in upsert.values() if m.value and m.envelope["op"] == "u")
        assert update.envelope["before"] is None and update.envelope["after"]["name"] == "B"

        bare = read_topic(kafka_bootstrap_servers, f"{schema}.upsert_json")
        assert {"id": 1, "name": "a"} in [json.loads(m.value) for m in bare if m.value]  # the row itself
        assert any(m.value is None for m in bare)

        full = read_topic(kafka_bootstrap_servers, f"{schema}.all_mode")
        update = next(m for m in full if m.value and m.envelope["op"] == "u")
        assert update.envelope["before"]["name"] == "b"
        assert all(m.value is not None for m in full)

        assert table_properties(f"{schema}.upsert_auto")["log.changelog-mode"] == "upsert"
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap_servers)
        try:
            topic = f"{schema}.upsert_auto"
            described = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
            assert described["topic"][topic]["cleanup.policy"]["value"] == "compact"
        finally:
            admin.close()


class TestJsonFormatRefusesWhatItCannotExpress:
    @pytest.fixture(scope="class")
    def models(self):
        return {"bare.sql": customers(**{"log.format": "json", "log.changelog-mode": "all"})}

    def test_json_all(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.bare"
        _run(1)  # inserts only: fine
        assert_contract(kafka_bootstrap_servers, relation, relation, value_format="json")
        out = failure_text(["run", "--vars", "{step: 2}"])
        assert "Model 'bare'" in out and "'log.format' = 'json'" in out and "Nothing was changed" in out
        assert sorted(tuple(r) for r in spark().table(relation).collect()) == [(1, "a"), (2, "b"), (3, "c")]
        assert_contract(kafka_bootstrap_servers, relation, relation, value_format="json")


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
            "upsert_orc.sql": MERGE.format(file_format="orc", mode="upsert"),
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
        assert response["rows_affected"] == 1 and response["rows_mirrored"] == 1
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
