"""A locked-down Apache Kafka (tests/kafka_cluster.py, one node of this module's own): SASL/SCRAM
authentication, ACLs (StandardAuthorizer) and topic auto-creation off. Each case is a real dbt
run whose principal lacks something: the run fails before the table changes, with the one-line
cause of kafka/errors.py; with the ACLs docs/operations.md lists ("The ACLs a run needs"), it succeeds and its log replays to the
table. No password reaches the console, dbt's log or target/."""
import pytest

from dbt.tests.util import run_dbt_and_capture
from tests.functional.contract import assert_contract, spark
from tests.functional.dbt_helpers import failure_text
from tests.functional.test_kafka_errors import _everything_written
from tests.kafka_cluster import ADMIN, KafkaCluster

# Distinct, never-printed passwords: each is searched for in everything a run writes.
USERS = {"writer": "Writer-pw-7c1e9", "stranger": "Stranger-pw-4b2d8", "nocreate": "NoCreate-pw-93fa0"}
WRONG_PASSWORD = "Wrong-pw-d05a7"
SECRETS = (*USERS.values(), WRONG_PASSWORD, ADMIN[1])
MODEL = {"t.sql": "{{ config(materialized='table', unique_key='id', log_system='kafka') }} "
                  "select id, concat('v', cast({{ var('step', 1) }} as string)) as version "
                  "from range(5) as r(id)"}


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory):
    kafka = KafkaCluster(tmp_path_factory.mktemp("secure_kafka"), nodes=1, sasl_users=USERS,
                         config={"auto.create.topics.enable": "false"})
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def kafka_bootstrap_servers(secure_cluster):
    """This module's dbt profiles point at the locked-down cluster (tests/conftest.py's
    dbt_profile_target takes the servers from here)."""
    return secure_cluster.bootstrap_servers


def sasl_properties(user: str, password: str) -> dict:
    """The profile's kafka_properties for a SCRAM login, in the names kafka-python takes
    (docs/configuration.md, profile field kafka_properties: sasl.plain.username / sasl.plain.password)."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.plain.username": user, "sasl.plain.password": password}


def admin_client(cluster: KafkaCluster):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000,
                            **cluster.admin_client_config())


def grant(cluster: KafkaCluster, user: str, grants) -> None:
    """As the super user: allow `user` each (resource type, name, pattern type, operations)."""
    from kafka.admin import ACL, ACLPermissionType, ResourcePattern

    acls = [ACL(principal=f"User:{user}", host="*", operation=op,
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(kind, name, pattern))
            for kind, name, pattern, operations in grants for op in operations]
    admin = admin_client(cluster)
    try:
        result = admin.create_acls(acls)
        assert not result["failed"], result["failed"]
    finally:
        admin.close()


def create_topics(cluster: KafkaCluster, *names: str) -> None:
    from kafka.admin import NewTopic

    admin = admin_client(cluster)
    try:
        admin.create_topics([NewTopic(n, 1, 1) for n in names])
    finally:
        admin.close()


def topics(cluster: KafkaCluster) -> set:
    admin = admin_client(cluster)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def assert_no_secret(out: str, project) -> None:
    written = _everything_written(project.project_root)
    assert written, "dbt wrote no log or artifact to search"
    for secret in SECRETS:
        assert secret not in out and secret not in written, "a password was printed or stored"


def assert_table_untouched(project) -> None:
    assert not spark().catalog.tableExists(f"{project.test_schema}.t"), "the table was created"


class _Case:
    user = "writer"
    password = ""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        return {**dbt_profile_target,
                "kafka_properties": sasl_properties(self.user, self.password or USERS[self.user])}

    @pytest.fixture(scope="class")
    def models(self):
        return MODEL


class TestNoAclsOnTheTopic(_Case):
    """The topic exists (the operators made it), but this principal has no ACL at all."""
    user = "stranger"

    def test_refused_before_the_table_changes(self, project, secure_cluster):
        topic = f"{project.test_schema}.t"  # the default topic: <schema>.<model>
        create_topics(secure_cluster, topic, topic + "__logstore_commits")
        out = failure_text(["run"])
        print(f"\nstranger: {out[out.find('Model '):][:700]}")
        assert "Model 't'" in out and "not authorized" in out, out[-2000:]
        assert "ACLs" in out and "Nothing was changed" in out, out[-2000:]
        assert "ERROR:kafka" not in out and "Traceback" not in out
        assert_table_untouched(project)
        assert_no_secret(out, project)


class TestMayWriteButNotCreate(_Case):
    """Every ACL but CREATE; the topic is missing and the broker does not auto-create it."""
    user = "nocreate"

    def test_missing_topic_refused_before_the_table_changes(self, project, secure_cluster):
        from kafka.admin import ACLOperation as Op, ACLResourcePatternType as Pattern, ResourceType

        topic = f"{project.test_schema}.t"
        grant(secure_cluster, self.user, [
            (ResourceType.TOPIC, topic, Pattern.PREFIXED, [Op.WRITE, Op.READ, Op.DESCRIBE]),
            (ResourceType.TRANSACTIONAL_ID, "dbt-logstore.", Pattern.PREFIXED, [Op.WRITE, Op.DESCRIBE]),
        ])
        out = failure_text(["run"])
        print(f"\nnocreate: {out[out.find('Model '):][:700]}")
        assert "Model 't'" in out and "Nothing was changed" in out, out[-2000:]
        assert "not authorized" in out and "create" in out, out[-2000:]
        assert "Traceback" not in out
        assert topic not in topics(secure_cluster), "neither the run nor the broker created it"
        assert_table_untouched(project)
        assert_no_secret(out, project)


class TestWrongPassword(_Case):
    user = "writer"
    password = WRONG_PASSWORD

    def test_authentication_failed(self, project):
        out = failure_text(["run"])
        print(f"\nwrong password: {out[out.find('Model '):][:700]}")
        assert "Model 't'" in out and "authentication failed" in out, out[-2000:]
        assert "sasl.plain.password" in out and "Nothing was changed" in out, out[-2000:]
        assert "ERROR:kafka" not in out and "WARNING:kafka" not in out
        assert_table_untouched(project)
        assert_no_secret(out, project)


class TestAuthorizedWriter(_Case):
    """The ACLs docs/operations.md lists ("The ACLs a run needs"): the topic and its control topic (describe, create, read,
    write), the transactional ids 'dbt-logstore.*' (write, describe). No consumer group: the
    run's readers assign partitions without one."""
    user = "writer"

    def test_run_succeeds_and_the_log_replays(self, project, secure_cluster):
        from kafka.admin import ACLOperation as Op, ACLResourcePatternType as Pattern, ResourceType

        topic = f"{project.test_schema}.t"
        grant(secure_cluster, self.user, [
            # prefixed: the topic and its __logstore_commits control topic
            (ResourceType.TOPIC, topic, Pattern.PREFIXED,
             [Op.WRITE, Op.READ, Op.DESCRIBE, Op.CREATE]),
            (ResourceType.TRANSACTIONAL_ID, "dbt-logstore.", Pattern.PREFIXED, [Op.WRITE, Op.DESCRIBE]),
        ])
        for step in (1, 2):  # a new log, then a log that goes on (the topic exists, is described)
            # the exit state checked here, with the run's output saying why should it fail
            results, out = run_dbt_and_capture(["run", "--vars", f"{{step: {step}}}"], expect_pass=None)
            assert [str(r.status) for r in results] == ["success"], out[-2000:]
            print(f"\nwriter run {step}: " + " ".join(l.strip() for l in out.splitlines() if "mirrored" in l))
            assert "mirrored" in out and f"snapshot {step}" in out, out[-2000:]
            assert_no_secret(out, project)
        assert {topic, topic + "__logstore_commits"} <= topics(secure_cluster)
        # read back as the writer: its own ACLs let it read what it wrote
        client = secure_cluster.admin_client_config(self.user, USERS[self.user])
        messages = assert_contract(secure_cluster.bootstrap_servers, topic,
                                   f"{project.test_schema}.t", client=client)
        assert len(messages) == 10, "five inserts, then five updates"
