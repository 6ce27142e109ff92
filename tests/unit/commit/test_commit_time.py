"""ts_ms is the table commit's time, recorded with the commit: a re-sent change set keeps it."""
from dbt.adapters.logstore import names
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.commit.snapshots import Attempt, Snapshot, TableRef, committed_ms


def test_the_recorded_commit_time_belongs_to_its_change_set_only():
    props = {names.COMMITTED: "cs-2", names.COMMITTED_MS: "1795739935925"}
    assert committed_ms(props, "cs-2") == 1795739935925
    assert committed_ms(props, "cs-3") is None  # another change set's time is not this one's
    assert committed_ms({names.COMMITTED: "cs-2"}, "cs-2") is None  # a commit that did not record it


def test_an_attempt_carries_the_commit_time_not_its_own():
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="b:9092")
    resent = Attempt.new(log, TableRef("s", "t", 1795739935925), Snapshot(id=4), "cs-5")
    assert resent.ts_ms == 1795739935925
    assert Attempt.new(log, TableRef("s", "t"), Snapshot(id=4), "cs-5").ts_ms > 1795739935925
    assert TableRef("s", "t", 1).writer_id == "s.t"


def test_recovery_names_the_step_the_failed_run_died_in():
    from dbt.adapters.logstore.commit.table_commit import failed_step

    assert failed_step({names.INTENT: "cs"}, "cs") == "in the table commit"
    assert failed_step({names.INTENT: "cs", names.COMMITTED: "cs"}, "cs") == \
        "in the log write, after the table commit"
    assert failed_step({names.COMMITTED: "cs", names.MIRRORED: "cs"}, "cs") == "after the log write"
