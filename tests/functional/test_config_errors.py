"""Config spellings from every place dbt reads config, and bad input failing before any change."""
import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.logstore.cli.broker import free_port
from tests.functional.dbt_helpers import failure_text
from tests.functional.contract import assert_contract, spark, table_properties

PLAIN = "select 1 as id, 'x' as name"


class TestSpellingsEverywhere:
    """dbt_project.yml (dotted), schema yml (underscored), config() (dotted)."""

    @pytest.fixture(scope="class")
    def project_config_update(self, unique_schema):
        return {"models": {"test": {"from_project": {
            "+log.system": "kafka", "+kafka.topic": f"{unique_schema}.spelled.in.project",
            "+log.consistency": "eventual", "+unique_key": "id"}}}}

    @pytest.fixture(scope="class")
    def models(self, unique_schema):
        return {
            "from_project.sql": "{{ config(materialized='table') }} " + PLAIN,
            "from_yml.sql": "{{ config(materialized='table') }} " + PLAIN,
            "from_config.sql": "{{ config(materialized='table', **{'log.system': 'kafka', "
                               "'log.system.partitions': 2}) }} " + PLAIN,
            "schema.yml": """
version: 2
models:
  - name: from_yml
    config:
      log_system: kafka
      kafka_topic: """ + unique_schema + """_spelled_in_yml
      log_consistency: transactional
""",
        }

    def test_each_place(self, project, kafka_bootstrap_servers):
        run_dbt(["run"])
        schema = project.test_schema
        expected = {
            "from_project": (f"{schema}.spelled.in.project", "eventual", "1"),
            "from_yml": (f"{schema}_spelled_in_yml", "transactional", "1"),
            "from_config": (f"{schema}.from_config", "transactional", "2"),
        }
        for model, (topic, consistency, partitions) in expected.items():
            props = table_properties(f"{schema}.{model}")
            assert (props["kafka.topic"], props["log.consistency"],
                    props["log.system.partitions"]) == (topic, consistency, partitions)
            assert_contract(kafka_bootstrap_servers, topic, f"{schema}.{model}")


class TestNoLogBehavesAsSpark:
    @pytest.fixture(scope="class")
    def models(self):
        return {"plain.sql": "{{ config(materialized='table') }} " + PLAIN}

    def test_no_log_properties_and_no_topic(self, project):
        run_dbt(["run"])
        props = table_properties(f"{project.test_schema}.plain")
        assert "kafka.topic" not in props and "logstore.changeset.committed" not in props




class TestLogOnViewIsRejectedAtParse:
    @pytest.fixture(scope="class")
    def models(self):
        return {"v.sql": "{{ config(materialized='view', log_system='kafka') }} " + PLAIN}

    def test_view(self, project):
        out = failure_text(["run"])
        assert "Model 'v'" in out and "log.system" in out
        assert "allowed materializations are table, incremental" in out


class TestUnknownValueIsRejected:
    @pytest.fixture(scope="class")
    def models(self):
        return {"t.sql": "{{ config(materialized='table', log_system='kafka', "
                         "log_consistency='sometimes') }} " + PLAIN}

    def test_unknown_consistency(self, project):
        text = failure_text(["run"])
        assert "Model 't'" in text and "'log.consistency'" in text and "transactional, eventual" in text
        assert not spark().catalog.tableExists(f"{project.test_schema}.t")


class TestMissingServersIsRejected:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        target = dict(dbt_profile_target)
        target.pop("kafka_bootstrap_servers")
        return target

    @pytest.fixture(scope="class")
    def models(self):
        return {"t.sql": "{{ config(materialized='table', log_system='kafka') }} " + PLAIN}

    def test_missing_servers(self, project):
        out = failure_text(["run"])
        assert "kafka.bootstrap.servers" in out and "Model 't'" in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.t")


class TestBrokerDownFailsBeforeTheTableChanges:
    @pytest.fixture(scope="class")
    def models(self):
        dead = f"127.0.0.1:{free_port()}"
        return {"t.sql": "{{ config(materialized='table', log_system='kafka', "
                         f"kafka_bootstrap_servers='{dead}') }}}} " + PLAIN}

    def test_broker_down(self, project):
        out = failure_text(["run"])
        assert "Model 't'" in out and "unreachable: no broker answered" in out and "Nothing was changed" in out
        assert "the model's kafka_bootstrap_servers" in out and "ERROR:kafka" not in out  # kafka-python's own lines: debug log only
        assert not spark().catalog.tableExists(f"{project.test_schema}.t")


class TestDuplicateKeysFailBeforeTheCommit:
    @pytest.fixture(scope="class")
    def models(self):
        return {"t.sql": """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select * from values {% if var('step', 1) == 1 %} (1, 'a') {% elif var('step') == 2 %} (1, 'a'), (1, 'b')
                     {% else %} (1, 'a'), (2, 'b') {% endif %} as t(id, v)
""", "born_repeated.sql": """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select * from values (1, 'a'), (2, 'b'), (2, 'c') as t(id, v)
"""}

    def test_duplicate_keys(self, project, kafka_bootstrap_servers):
        run_dbt(["run", "-s", "t"])
        # a rebuild: the diff itself finds the repeated key
        out = failure_text(["run", "-s", "t", "--vars", "{step: 2}"])
        assert "Model 't'" in out and "unique_key" in out and '{"id":1}' in out
        relation = f"{project.test_schema}.t"
        assert [tuple(r) for r in spark().table(relation).collect()] == [(1, "a")]
        assert_contract(kafka_bootstrap_servers, relation, relation)
        # what the failed run left is cleared and the next run logs only its own change
        run_dbt(["run", "-s", "t", "--vars", "{step: 3}"])
        assert len(assert_contract(kafka_bootstrap_servers, relation, relation)) == 2

    def test_duplicate_keys_at_the_first_build(self, project):
        out = failure_text(["run", "-s", "born_repeated"])
        assert "Model 'born_repeated'" in out and "unique_key" in out and '{"id":2}' in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.born_repeated")


class TestEveryBadModelInOnePass:
    """Three models with bad log options: parse, compile and run each name all three, with key,
    value and what is allowed, and nothing is built."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "bad_consistency.sql": "{{ config(materialized='table', log_system='kafka', "
                                   "log_consistency='sometimes') }} " + PLAIN,
            "bad_partitions.sql": "{{ config(materialized='table', log_system='kafka', "
                                  "log_system_partitions=0) }} " + PLAIN,
            "bad_view.sql": "{{ config(materialized='view', log_system='kafka') }} " + PLAIN,
            "fine.sql": "{{ config(materialized='table', log_system='kafka') }} " + PLAIN,
        }

    def test_all_named(self, project):
        for command in (["parse"], ["compile"], ["run"]):
            out = failure_text(command)
            assert "3 models have an invalid log configuration" in out, (command, out[-2000:])
            assert "Model 'bad_consistency'" in out and "transactional, eventual" in out
            assert "Model 'bad_partitions'" in out and "'log.system.partitions'" in out
            assert "Model 'bad_view'" in out and "allowed materializations are table, incremental" in out
            assert "Model 'fine'" not in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.fine")


class TestTyposFailAtParseWithASuggestion:
    """No silent typos: every misspelt key of the adapter's families fails `dbt parse`, naming
    the model, the key, where it came from and the closest key, without a list of every key."""

    @pytest.fixture(scope="class")
    def models(self):
        def model(extra):
            return "{{ config(materialized='table', log_system='kafka', " + extra + ") }} " + PLAIN

        return {
            "underscored.sql": model("kafka_topc='crm.typo2'"),
            "dotted.sql": model("**{'kafka.topik': 'crm.typo'}"),
            "amoro.sql": model("**{'properties.lingr.ms': '5'}"),
            "option.sql": model("**{'log.consistancy': 'eventual'}"),
            "fine.sql": model("**{'kafka.linger.ms': 5, 'properties.batch.size': 1024, "
                              "'kafka.topic-config.cleanup.policy': 'delete'}"),
        }

    def test_parse(self, project):
        out = failure_text(["parse"])
        assert "4 models have an invalid log configuration" in out, out[-2000:]
        assert ("Model 'underscored': unknown config key 'kafka_topc' (config() in models/underscored.sql). "
                "Did you mean 'kafka_topic'?") in out
        assert ("Model 'dotted': unknown config key 'kafka.topik' (config() in models/dotted.sql, and kafka-python "
                "has no property 'topik'). Did you mean 'kafka.topic'?") in out
        assert ("Model 'amoro': unknown config key 'properties.lingr.ms' (config() in models/amoro.sql, and "
                "kafka-python has no property 'lingr.ms'). Did you mean 'properties.linger.ms'?") in out
        assert ("Model 'option': unknown config key 'log.consistancy' (config() in models/option.sql). "
                "Did you mean 'log.consistency'?") in out
        assert "Allowed under" not in out and "log.system.partitions" not in out  # no list
        assert "Model 'fine'" not in out and "kafka_properties" not in out


class TestUniqueKeyAsDbtReadsIt:
    """unique_key='' is no key, a column named twice is one key column, and a column the rows
    lack fails in one sentence before the table changes."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "no_key.sql": "{{ config(materialized='table', log_system='kafka', unique_key='') }} " + PLAIN,
            "twice.sql": "{{ config(materialized='table', log_system='kafka', "
                         "unique_key=['id', 'id']) }} " + PLAIN,
            "missing.sql": "{{ config(materialized='table', log_system='kafka', "
                           "unique_key='idd') }} " + PLAIN,
        }

    def test_parse_and_run(self, project, kafka_bootstrap_servers):
        run_dbt(["parse"])
        run_dbt(["run", "-s", "no_key", "twice"])
        schema = project.test_schema
        assert table_properties(f"{schema}.no_key").get("log.key", "") == ""
        assert [m.key for m in assert_contract(kafka_bootstrap_servers, f"{schema}.no_key",
                                               f"{schema}.no_key")] == [None]
        assert table_properties(f"{schema}.twice")["log.key"] == "id"
        assert [m.key for m in assert_contract(kafka_bootstrap_servers, f"{schema}.twice",
                                               f"{schema}.twice")] == [b'{"id":1}']

    def test_a_missing_key_column(self, project):
        out = failure_text(["run", "-s", "missing"])
        assert ("Model 'missing': config 'unique_key' = ['idd'] names column 'idd', which the "
                "model's rows do not have (allowed: id, name); nothing was changed.") in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.missing")
