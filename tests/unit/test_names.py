"""Every name of the log protocol has one home, names.py: its value appears in no other file of
the package (.py, .sql, .yml; code, docstrings and comments alike, so no copy can drift from what
the others write and read), and the values are the ones existing topics and tables hold."""
import re
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from dbt.adapters.logstore import names

PACKAGE = Path(__file__).resolve().parents[2] / "dbt"
HOME = Path(names.__file__).resolve()


def package_files() -> List[Path]:
    return sorted(p for p in PACKAGE.rglob("*")
                  if p.suffix in (".py", ".sql", ".yml") and p.resolve() != HOME)


def protocol_names() -> Dict[str, str]:
    """Each value names.py defines (tuple and dict members one by one) -> its constant."""
    found: Dict[str, str] = {}

    def add(constant: str, value: object) -> None:
        if isinstance(value, bytes):
            value = value.decode()
        if isinstance(value, str):
            found[value] = constant
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                add(f"{constant}[{i}]", item)
        elif isinstance(value, dict):
            for key, item in value.items():
                add(f"{constant}[{key!r}]", item)

    for constant, value in vars(names).items():
        if constant.isupper():
            add(constant, value)
    return found


def copies_in(text: str) -> List[str]:
    """`line: CONSTANT 'value'` for each protocol name in `text`; of names inside one another
    (`__logstore_` in `__logstore_lock`), the longest."""
    constants, found = protocol_names(), []
    for number, line in enumerate(text.splitlines(), 1):
        spans: List[Tuple[int, int, str]] = sorted(
            (m.start(), m.end(), value) for value in constants
            for m in re.finditer(re.escape(value), line))
        for start, end, value in spans:
            if not any(a <= start and end <= b and (a, b) != (start, end) for a, b, _ in spans):
                found.append(f"{number}: {constants[value]} {value!r}")
    return found


def stray_copies(files: Iterable[Path]) -> List[str]:
    """`file:line: CONSTANT 'value'` for every copy of a protocol name in `files`."""
    return [f"{path.relative_to(PACKAGE.parent)}:{copy}"
            for path in files for copy in copies_in(path.read_text())]


def test_no_copy_of_a_name_outside_names_py():
    copies = stray_copies(package_files())
    assert not copies, "take these from names.py (macros: through the adapter):\n" + "\n".join(copies)


def test_a_copy_is_found_in_code_and_comments():
    sql = ("{#-- tags 'logstore.changeset.mirrored' --#}\n"
           "create table t tblproperties ('logstore.changeset.id' = '1')")
    assert copies_in(sql) == ["1: MIRRORED 'logstore.changeset.mirrored'",
                              "2: CHANGESET_ID 'logstore.changeset.id'"]
    python = 'x = 1\nstaged = f"{model}__logstore_new"  # the __logstore_ tables\n'
    assert copies_in(python) == ["2: STAGED_SUFFIXES['new'] '__logstore_new'",
                                 "2: RELATION_MARK '__logstore_'"]
    assert copies_in("tombstone = b'after-delete'") == ["1: TOMBSTONE_AFTER_DELETE 'after-delete'"]


def test_each_value_is_named_once():
    values = [v.decode() if isinstance(v, bytes) else v for k, v in vars(names).items()
              if k.isupper() and isinstance(v, (str, bytes))]
    assert all(values) and len(values) == len(set(values))


def test_the_values_are_those_on_the_wire_and_in_metastores():
    # Users' topics and tables hold these: a changed value leaves them unreadable.
    assert protocol_names() == {
        "__logstore_commits": "CONTROL_TOPIC_SUFFIX",
        "__logstore_runs": "RUN_TOPIC_SUFFIX",
        "run-record.": "RUN_WRITER_PREFIX",
        "dbt-logstore.": "TRANSACTIONAL_ID_PREFIX",
        "task-": "TASK_PREFIX",
        "-batch-": "BATCH_INFIX",
        "logstore.table": "H_TABLE",
        "logstore.snapshot": "H_SNAPSHOT",
        "logstore.changeset": "H_CHANGESET",
        "logstore.attempt": "H_ATTEMPT",
        "logstore.writer": "H_WRITER",
        "logstore.tombstone": "H_TOMBSTONE",
        "logstore.starts-generation": "H_GENERATION",
        "after-delete": "TOMBSTONE_AFTER_DELETE",
        "logstore.changeset.id": "CHANGESET_ID",
        "logstore.changeset.committed": "COMMITTED",
        "logstore.changeset.committed-ms": "COMMITTED_MS",
        "logstore.changeset.mirrored": "MIRRORED",
        "logstore.topic.partitions": "TOPIC_PARTITIONS",
        "logstore.changeset.intent": "INTENT",
        "logstore.intent.rows_before": "INTENT_ROWS_BEFORE",
        "logstore.intent.rows_after": "INTENT_ROWS_AFTER",
        "logstore.intent.table_state": "INTENT_TABLE_STATE",
        "logstore.snapshot.id": "SNAPSHOT_ID",
        "logstore.snapshot.offsets": "SNAPSHOT_OFFSETS",
        "logstore.snapshot.attempt": "SNAPSHOT_ATTEMPT",
        "logstore.snapshot.table-version": "SNAPSHOT_TABLE_VERSION",
        "logstore.log.cluster-id": "LOG_CLUSTER_ID",
        "logstore.log.topic-id": "LOG_TOPIC_ID",
        "logstore.log.topic": "LOG_TOPIC",
        "logstore.log.control-topic-id": "LOG_CONTROL_TOPIC_ID",
        "logstore.generation": "GENERATION",
        "logstore.generation.snapshot": "GENERATION_SNAPSHOT",
        "logstore.generation.offsets": "GENERATION_OFFSETS",
        "logstore.generation.pending": "GENERATION_PENDING",
        "logstore.sources": "SOURCES",
        "logstore.sources.intent": "SOURCES_INTENT",
        "logstore.lock.invocation": "LOCK_INVOCATION",
        "logstore.lock.host": "LOCK_HOST",
        "logstore.lock.pid": "LOCK_PID",
        "logstore.lock.process_started": "LOCK_STARTED",
        "logstore.lock.since": "LOCK_SINCE",
        "logstore.lock.lease_id": "LOCK_TOKEN",
        "logstore.lock.expires_ms": "LOCK_EXPIRES",
        "logstore.lock.spark_session": "LOCK_SPARK_SESSION",
        "__logstore_": "RELATION_MARK",
        "__logstore_changes": "CHANGES_SUFFIX",
        "__logstore_lock": "LOCK_SUFFIX",
        "__logstore_new": "STAGED_SUFFIXES['new']",
        "__logstore_merged": "STAGED_SUFFIXES['merged']",
        "__logstore_upserts": "STAGED_SUFFIXES['upserts']",
        "__logstore_kafka": "STAGED_SUFFIXES['kafka']",
        "__logstore_held": "STAGED_SUFFIXES['held']",
        "__logstore_uncommitted": "UNCOMMITTED_SUFFIX",
        "__gc": "GC_SUFFIX",
        "__logstore_src_": "SOURCE_RAW_INFIX",
        "__logstore_changes_": "SOURCE_VIEW_INFIX",
        "__logstore_op": "CHANGE_COLUMNS[0]",
        "__logstore_key": "CHANGE_COLUMNS[1]",
        "__logstore_before": "CHANGE_COLUMNS[2]",
        "__logstore_after": "CHANGE_COLUMNS[3]",
        "__logstore_row": "SCRATCH_ROW",
        "__logstore_k": "SCRATCH_KEY",
        "__logstore_repeated": "SCRATCH_REPEATED",
        "__logstore_rank": "SCRATCH_RANK",
        "_logstore_op": "VIEW_OP_COLUMN",
        "_logstore_snapshot": "VIEW_SNAPSHOT_COLUMN",
        "_logstore_": "VIEW_COLUMN_PREFIX",
    }


def test_names_py_is_a_leaf():
    assert not re.search(r"^\s*(from|import)\s+dbt\b", HOME.read_text(), re.M)


def test_the_writers_of_a_parallel_mirror_are_named_from_the_tables():
    assert names.task_writer_id("analytics.orders", 3) == "analytics.orders.task-3"
    assert names.task_writer_name(3, 1) == "task-3.1"
    assert names.transactional_id(names.task_writer_id("analytics.orders", 3)) == \
        "dbt-logstore.analytics.orders.task-3"


def test_a_microbatch_batch_has_a_change_set_of_its_own():
    from types import SimpleNamespace

    from dbt.adapters.logstore.impl import LogstoreAdapter

    assert names.changeset_id("inv") == "inv"
    assert names.changeset_id("inv", "20240102") == "inv-batch-20240102"
    # the node as the macros hand it (a dict) and as dbt holds it (BatchContext on the node)
    batch = {"batch": {"id": "20240102"}}
    assert LogstoreAdapter.logstore_changeset_id(None, "inv", batch) == "inv-batch-20240102"
    node = SimpleNamespace(batch=SimpleNamespace(id="20240102"))
    assert LogstoreAdapter.logstore_changeset_id(None, "inv", node) == "inv-batch-20240102"
    assert LogstoreAdapter.logstore_changeset_id(None, "inv", {"name": "m"}) == "inv"
    assert LogstoreAdapter.logstore_changeset_id(None, "inv", None) == "inv"
