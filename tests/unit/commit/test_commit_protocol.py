"""The commit protocol (commit/protocol.py): its recovery decisions, when a log starts, and the
order of a commit's steps over a recording fake of dbt and Spark."""
import pytest
from dbt_common.exceptions import DbtRuntimeError as _RuntimeError

from dbt.adapters.logstore.commit.protocol import log_is_new, recovery_action
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError
from dbt.adapters.logstore.names import (
    CHANGESET_ID, COMMITTED, INTENT, INTENT_ROWS_AFTER, INTENT_ROWS_BEFORE, MIRRORED, TOPIC_PARTITIONS,
)

_action = recovery_action


# --- recovery_action ----------------------------------------------------------------------


@pytest.mark.parametrize("changes_props", [{}, {CHANGESET_ID: ""}, {"other": "x"}])
def test_no_changeset_id_drops(changes_props):
    table = {COMMITTED: "run-1", MIRRORED: "run-0"}
    assert recovery_action(changes_props, table) == "drop"


def test_committed_not_mirrored_mirrors():
    assert recovery_action({CHANGESET_ID: "run-2"}, {COMMITTED: "run-2"}) == "mirror"
    assert recovery_action({CHANGESET_ID: "run-2"},
                           {COMMITTED: "run-2", MIRRORED: "run-1"}) == "mirror"


def test_committed_and_mirrored_drops():
    assert recovery_action({CHANGESET_ID: "run-2"},
                           {COMMITTED: "run-2", MIRRORED: "run-2"}) == "drop"


@pytest.mark.parametrize("table_props", [
    {},
    {COMMITTED: "run-1"},  # an older commit: this change set's commit never happened
    {COMMITTED: "run-1", MIRRORED: "run-1"},
    {MIRRORED: "run-2"},
])
def test_not_committed_drops(table_props):
    assert recovery_action({CHANGESET_ID: "run-2"}, table_props) == "drop"


def _intent_with_state(before, after, state):
    from dbt.adapters.logstore.names import INTENT, INTENT_ROWS_AFTER, INTENT_ROWS_BEFORE, INTENT_TABLE_STATE

    return {INTENT: "run-2", COMMITTED: "run-1", MIRRORED: "run-1", INTENT_ROWS_BEFORE: str(before),
            INTENT_ROWS_AFTER: str(after), INTENT_TABLE_STATE: state}


@pytest.mark.parametrize("state_after,row_count,action", [
    ("files:a", 9, "drop"),  # the table's files as before: the overwrite never took effect
    ("files:b", 9, "mirror"),  # new files and the intended count: it did
    ("files:b", 6, None),  # new files, another count (a partial job commit): undecidable
])
def test_an_overwrite_that_keeps_the_row_count_is_judged_by_the_tables_files(state_after, row_count, action):
    # a microbatch batch re-processed: 9 rows before, 9 after (the soak's round 23)
    props = _intent_with_state(9, 9, "files:a")
    if action is None:
        with pytest.raises(_RuntimeError, match="cannot be told"):
            recovery_action({CHANGESET_ID: "run-2"}, props, row_count, state_after)
    else:
        assert recovery_action({CHANGESET_ID: "run-2"}, props, row_count, state_after) == action


def test_a_versioned_tables_commit_is_judged_by_its_version():
    # Iceberg and Delta commit atomically: another version is the commit, whatever the count
    props = _intent_with_state(5, 8, "version:41")
    assert recovery_action({CHANGESET_ID: "run-2"}, props, 5, "version:41", atomic=True) == "drop"
    assert recovery_action({CHANGESET_ID: "run-2"}, props, 6, "version:42", atomic=True) == "mirror"


def test_a_versioned_tables_intent_needs_no_row_counts():
    # its intent records none (each was a Spark job): the version alone judges, and the counts an
    # older intent left on the table are never read
    from dbt.adapters.logstore.names import INTENT_TABLE_STATE

    props = {INTENT: "run-2", COMMITTED: "run-1", MIRRORED: "run-1", INTENT_TABLE_STATE: "version:41"}
    assert recovery_action({CHANGESET_ID: "run-2"}, props, None, "version:41", atomic=True) == "drop"
    assert recovery_action({CHANGESET_ID: "run-2"}, props, None, "version:43", atomic=True) == "mirror"
    stale = {**props, INTENT_ROWS_BEFORE: "5", INTENT_ROWS_AFTER: "8"}
    with pytest.raises(_RuntimeError, match="version:41 before it and cannot be read now.*cannot be told"):
        recovery_action({CHANGESET_ID: "run-2"}, stale, 8, None, atomic=True)


def test_without_a_state_the_row_counts_judge_as_before():
    props = _intent_with_state(5, 8, "files:a")
    assert recovery_action({CHANGESET_ID: "run-2"}, props, 8) == "mirror"
    assert recovery_action({CHANGESET_ID: "run-2"}, props, 5) == "drop"


# --- log_is_new: a log that starts now, or continues with the same meaning ------------------

KAFKA_LOG = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                      bootstrap_servers="b1:9092,b2:9092", unique_key=("id",),
                      changelog_mode="upsert", partitions=3)


def stored(log=KAFKA_LOG, partitions="3", **overrides):
    """The table properties a previous commit of `log` left, plus overrides (None: absent)."""
    props = dict(log.table_properties())
    if partitions is not None:
        props[TOPIC_PARTITIONS] = partitions
    props.update(overrides)
    return {k: v for k, v in props.items() if v is not None}


def test_log_continues_when_nothing_changed():
    assert log_is_new(KAFKA_LOG, stored(), 3) is False


def test_log_is_new_for_a_table_without_log_properties():
    assert log_is_new(KAFKA_LOG, {}, 3) is True
    assert log_is_new(KAFKA_LOG, {"numFiles": "2"}, 3) is True


def test_log_is_new_when_the_log_was_disabled():
    assert log_is_new(KAFKA_LOG, {"log.system": "none"}, 3) is True


@pytest.mark.parametrize("key,value", [
    ("log.system", "other"),
    ("kafka.topic", "analytics.orders_v1"),
    ("kafka.bootstrap.servers", "old-cluster:9092"),
])
def test_log_is_new_on_another_system_topic_or_cluster(key, value):
    assert log_is_new(KAFKA_LOG, stored(**{key: value}), 3) is True


@pytest.mark.parametrize("key", ["log.system", "kafka.topic", "kafka.bootstrap.servers"])
def test_log_is_new_when_an_identity_property_is_missing(key):
    assert log_is_new(KAFKA_LOG, stored(**{key: None}), 3) is True


def test_new_topic_may_change_key_format_and_partitions():
    props = stored(**{"kafka.topic": "analytics.orders_v1", "log.key": "other",
                      "log.format": "json"}, partitions="12")
    assert log_is_new(KAFKA_LOG, props, 3) is True  # a new topic starts fresh: no error


def error_of(log, props, partitions=3) -> str:
    with pytest.raises(LogConfigError) as info:
        log_is_new(log, props, partitions)
    return str(info.value)


@pytest.mark.parametrize("stored_key,current", [
    ("id", ("order_id",)),
    ("id", ("tenant", "id")),
    ("tenant,id", ("id", "tenant")),  # order is part of the key JSON
    ("id", ()),  # keyed -> keyless
    ("", ("id",)),  # keyless -> keyed
])
def test_unique_key_change_on_the_same_topic_fails(stored_key, current):
    log = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                    bootstrap_servers="b1:9092,b2:9092", unique_key=current)
    message = error_of(log, stored(log, **{"log.key": stored_key}))
    assert "orders_model" in message
    assert "'unique_key'" in message
    assert f"[{stored_key}]" in message and f"[{','.join(current)}]" in message
    assert "analytics.orders" in message
    assert "new 'kafka.topic'" in message  # what is allowed


def test_keyless_log_without_stored_key_continues():
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="b:1")
    props = stored(log)
    props.pop("log.key")  # keyless: an absent key is the empty key
    assert log_is_new(log, props, 3) is False


def test_format_change_on_the_same_topic_fails():
    log = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                    bootstrap_servers="b1:9092,b2:9092", unique_key=("id",), format="json",
                    changelog_mode="upsert")
    message = error_of(log, stored(**{"log.format": "debezium-json"}))
    assert "orders_model" in message
    assert "'log.format'" in message
    assert "'debezium-json'" in message and "'json'" in message
    assert "analytics.orders" in message


def test_absent_stored_format_means_debezium_json():
    props = stored(**{"log.format": None})
    assert log_is_new(KAFKA_LOG, props, 3) is False
    json_log = LogConfig(model="m", system="kafka", topic="analytics.orders",
                         bootstrap_servers="b1:9092,b2:9092", unique_key=("id",), format="json")
    assert "'log.format'" in error_of(json_log, props)


@pytest.mark.parametrize("stored_partitions,now", [("3", 6), ("6", 3), ("1", 2)])
def test_partition_count_change_on_the_same_topic_fails(stored_partitions, now):
    message = error_of(KAFKA_LOG, stored(partitions=stored_partitions), now)
    assert "orders_model" in message
    assert f"now has {now} partitions" in message
    assert f"written with {stored_partitions}" in message
    assert "analytics.orders" in message


@pytest.mark.parametrize("partitions", [None, ""])
def test_unknown_stored_partition_count_is_not_checked(partitions):
    # tables written before the partition count was recorded continue
    assert log_is_new(KAFKA_LOG, stored(partitions=partitions), 7) is False


def test_key_is_checked_before_format():
    log = LogConfig(model="m", system="kafka", topic="analytics.orders",
                    bootstrap_servers="b1:9092,b2:9092", unique_key=("other",), format="json")
    assert "'unique_key'" in error_of(log, stored())


@pytest.mark.parametrize("servers", [
    "b2:9092,b1:9092",  # the same brokers, listed in another order
    "b1:9092, b2:9092",  # a space after the comma
])
def test_same_cluster_listed_differently_is_not_a_new_log(servers):
    # A new log re-sends every current row as an insert into the same topic (duplicates for
    # consumers) and skips the key/format/partition checks; the same brokers are the same cluster.
    log = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                    bootstrap_servers=servers, unique_key=("id",), changelog_mode="upsert")
    assert log_is_new(log, stored(), 3) is False


# --- incremental commits: intent recorded before the statement, judged by row count --------

def _intent(before, after, changeset="cs1"):
    return {INTENT: changeset, INTENT_ROWS_BEFORE: str(before), INTENT_ROWS_AFTER: str(after)}


def test_intent_with_the_after_count_means_the_commit_happened():
    assert _action({"logstore.changeset.id": "cs1"}, _intent(10, 13), row_count=13) == "mirror"


def test_intent_with_the_before_count_means_it_did_not():
    assert _action({"logstore.changeset.id": "cs1"}, _intent(10, 13), row_count=10) == "drop"


def test_intent_of_another_change_set_is_ignored():
    assert _action({"logstore.changeset.id": "cs2"}, _intent(10, 13), row_count=13) == "drop"


@pytest.mark.parametrize("before,after,count", [(10, 10, 10), (10, 13, 12)])
def test_undecidable_intent_fails_clearly(before, after, count):
    with pytest.raises(_RuntimeError, match="cannot be told.*new 'kafka.topic'"):
        _action({"logstore.changeset.id": "cs1"}, _intent(before, after), row_count=count)


@pytest.mark.parametrize("before,after,count", [(10, 10, 10), (10, 13, 12)])
def test_an_empty_change_set_needs_no_judging(before, after, count):
    """(A failed statement that would have changed no row: dbt-tests-adapter's
    incremental_append_new_columns_remove_one.) Counted only when the counts cannot tell."""
    counted = []

    def changes_rows(rows):
        return lambda: counted.append(rows) or rows

    intent = _intent(before, after)
    assert _action({"logstore.changeset.id": "cs1"}, intent, row_count=count,
                   changes_rows=changes_rows(0)) == "drop"
    with pytest.raises(_RuntimeError, match="cannot be told"):
        _action({"logstore.changeset.id": "cs1"}, intent, row_count=count, changes_rows=changes_rows(1))
    assert _action({"logstore.changeset.id": "cs1"}, _intent(10, 13), row_count=13,
                   changes_rows=changes_rows(0)) == "mirror"
    assert counted == [0, 1]


def test_a_tag_wins_over_the_intent():
    props = {**_intent(10, 13), "logstore.changeset.committed": "cs1"}
    assert _action({"logstore.changeset.id": "cs1"}, props, row_count=0) == "mirror"
    props["logstore.changeset.mirrored"] = "cs1"
    assert _action({"logstore.changeset.id": "cs1"}, props, row_count=0) == "drop"




# --- the protocol's steps: what it asks of dbt and Spark ------------------------------------
# (The order of the steps is tested over a recording fake in test_macros.py, with the macros.)

def test_the_adapter_gives_every_step_the_protocol_asks_for_with_its_parameters():
    import inspect

    from dbt.adapters.logstore.commit.protocol import Steps
    from dbt.adapters.logstore.impl import LogstoreAdapter

    steps = [name for name in vars(Steps) if not name.startswith("_")]
    assert "logstore_mirror" in steps and "rename_relation" in steps
    for name in steps:
        wanted = list(inspect.signature(getattr(Steps, name)).parameters)
        given = list(inspect.signature(getattr(LogstoreAdapter, name)).parameters)
        assert given[:len(wanted)] == wanted, name
