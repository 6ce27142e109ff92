"""The one home of the names of the log protocol: topics, transactional ids, record headers,
table properties, relations and columns (docs/log-format.md says what each means).

They are on the wire and in users' metastores, so a value never changes: existing topics and
tables must stay readable. Every module and macro takes them from here (the macros through
adapter.logstore_names and adapter.logstore_relation); tests/unit/test_names.py fails on a copy
elsewhere. A leaf: imports nothing from the package.
"""

# Topics: a log topic's control topic is its name plus this suffix (log_config.control_topic_for;
# kafka.log_system creates it, the writers write it, its read side reads it for all readers).
CONTROL_TOPIC_SUFFIX = "__logstore_commits"

# A project's run topic: one run record per dbt invocation that could change logged tables
# (log/run_records.py), named after the target's schema and the dbt project (a project's dev
# and prod targets, like its models' default topics, have their own).
RUN_TOPIC_SUFFIX = "__logstore_runs"
# The run record's writer id (its transactional id with TRANSACTIONAL_ID_PREFIX): one per
# invocation, so two invocations of one project writing their records never fence each other.
RUN_WRITER_PREFIX = "run-record."


def run_topic_for(project: str, schema: str) -> str:
    """The run topic of dbt project `project` on a target of schema `schema` (a topic name:
    Kafka's legal characters, others as `_`)."""
    import re

    return re.sub(r"[^a-zA-Z0-9._-]", "_", f"{schema}.{project}") + RUN_TOPIC_SUFFIX


# Kafka transactional ids: this prefix plus the writer id (the writers write with it,
# kafka.log_system fences with it); the broker fences an earlier writer of the same id, so a new version must keep it.
TRANSACTIONAL_ID_PREFIX = "dbt-logstore."


def transactional_id(writer_id: str) -> str:
    """The Kafka transactional id of writer `writer_id` (a table's, or a task's: task_writer_id)."""
    return f"{TRANSACTIONAL_ID_PREFIX}{writer_id}"


# A change set's id is dbt's invocation id; a microbatch model commits one change set per batch
# within one invocation, so each batch's adds this and the batch's id (dbt's BatchContext.id).
BATCH_INFIX = "-batch-"


def changeset_id(invocation_id: str, batch_id: "str | None" = None) -> str:
    """The id of the change set a model run commits (the table's tags and the log's headers name
    it; recovery finds a failed run's change set by it, so no two commits may share one)."""
    return invocation_id if not batch_id else f"{invocation_id}{BATCH_INFIX}{batch_id}"


def invocation_of(changeset: str) -> str:
    """The invocation that committed change set `changeset` (changeset_id's first part)."""
    return str(changeset).split(BATCH_INFIX)[0]


# A Spark task of a parallel mirror writes as "<table's writer id>.task-<index>" (its transactional
# id), naming each attempt "task-<index>.<retry>" (its H_WRITER header).
TASK_PREFIX = "task-"


def task_writer_id(table_writer_id: str, task: int) -> str:
    """The writer id of task `task` of a parallel mirror (log_snapshots writes with it,
    kafka.log_system fences it after a crash): a restarted task of the same index uses the same
    transactional id, so the broker fences its predecessor."""
    return f"{table_writer_id}.{TASK_PREFIX}{task}"


def task_writer_name(task: int, task_attempt: int) -> str:
    """The H_WRITER header of the records of one Spark task attempt."""
    return f"{TASK_PREFIX}{task}.{task_attempt}"


# Record headers: log_snapshots.Attempt writes them, reader and source_changes read them.
H_TABLE = "logstore.table"
H_SNAPSHOT = "logstore.snapshot"
H_CHANGESET = "logstore.changeset"
H_ATTEMPT = "logstore.attempt"
H_WRITER = "logstore.writer"  # only on the records of a parallel attempt
# The generation number, only on the records of a snapshot that starts a generation: the table's
# rows as of a table version, a complete copy a consumer may start from (lifecycle/generations.py).
H_GENERATION = "logstore.starts-generation"
# The tombstone after a keyed delete carries this header and value (log_snapshots writes it,
# formats.is_tombstone_after_delete reads it).
H_TOMBSTONE = "logstore.tombstone"
TOMBSTONE_AFTER_DELETE = b"after-delete"

# Table properties of a logged table: commit_protocol and table_commit write them, recovery,
# readers and status read them (recovery and readers depend on them).
CHANGESET_ID = "logstore.changeset.id"  # on the change table
COMMITTED = "logstore.changeset.committed"
# the table commit's time (epoch ms), recorded with it: its records' ts_ms, re-sent or not
COMMITTED_MS = "logstore.changeset.committed-ms"
MIRRORED = "logstore.changeset.mirrored"
TOPIC_PARTITIONS = "logstore.topic.partitions"
INTENT = "logstore.changeset.intent"
INTENT_ROWS_BEFORE = "logstore.intent.rows_before"
INTENT_ROWS_AFTER = "logstore.intent.rows_after"
# What the table was before the commit (table_formats.table_state): its format version, or
# a fingerprint of its data files; unchanged means the commit never took effect.
INTENT_TABLE_STATE = "logstore.intent.table_state"
SNAPSHOT_ID = "logstore.snapshot.id"
SNAPSHOT_OFFSETS = "logstore.snapshot.offsets"
SNAPSHOT_ATTEMPT = "logstore.snapshot.attempt"
# The table format's own version (Iceberg snapshot id, Delta version) that holds the rows of
# snapshot SNAPSHOT_ID: a hybrid read reads the table AS OF it (table_formats.py).
SNAPSHOT_TABLE_VERSION = "logstore.snapshot.table-version"
# The log's identity as the table last saw it (lifecycle/identity.py compares them on every run):
# the cluster's id, the data topic's and the control topic's ids (Kafka's topic ids, KIP-516).
LOG_CLUSTER_ID = "logstore.log.cluster-id"
# The data topic the snapshot went to, by name: so a model of another project that reads the
# table as a `source()` names it among its inputs (commit/model_inputs.py).
LOG_TOPIC = "logstore.log.topic"
LOG_TOPIC_ID = "logstore.log.topic-id"
LOG_CONTROL_TOPIC_ID = "logstore.log.control-topic-id"
# The log's generation the table's snapshot is in, the snapshot that started it and the offsets
# where its complete copy of the table starts (lifecycle/generations.py).
GENERATION = "logstore.generation"
GENERATION_SNAPSHOT = "logstore.generation.snapshot"
GENERATION_OFFSETS = "logstore.generation.offsets"
# Set with the table commit of a change set that starts a generation (JSON: its change set, the
# generation, the snapshot before it, the log's end offsets): recovery finishes it as such.
GENERATION_PENDING = "logstore.generation.pending"
# How far a downstream table has read its upstream logs (source_changes; impl writes them).
SOURCES = "logstore.sources"
SOURCES_INTENT = "logstore.sources.intent"

# Properties of the run lock table: run_lock writes and reads them, impl renews the lease.
LOCK_INVOCATION = "logstore.lock.invocation"
LOCK_HOST = "logstore.lock.host"
LOCK_PID = "logstore.lock.pid"
LOCK_STARTED = "logstore.lock.process_started"
LOCK_SINCE = "logstore.lock.since"
# (not "token": Spark redacts the values of properties whose names say token or secret)
LOCK_TOKEN = "logstore.lock.lease_id"
LOCK_EXPIRES = "logstore.lock.expires_ms"
# the owner's Spark Connect session ("<user id>/<session id>"), whose statements a server runs
# on after the owner died: a run that takes the lock over stops them first
LOCK_SPARK_SESSION = "logstore.lock.spark_session"

# Relations of a model, `<model><suffix>` in its schema: impl and the macros create and drop
# them; leftovers takes a relation for ours only when its name carries RELATION_MARK.
RELATION_MARK = "__logstore_"
CHANGES_SUFFIX = "__logstore_changes"  # a commit's change set
LOCK_SUFFIX = "__logstore_lock"  # the run lock (run_lock)
# Staged rows a commit renames into the model's place, by the macros' name for them.
STAGED_SUFFIXES = {"new": "__logstore_new", "merged": "__logstore_merged",
                   "upserts": "__logstore_upserts",
                   # a catalog table USING kafka, Spark's Kafka writer's target (kafka/spark_writer.py)
                   "kafka": "__logstore_kafka",
                   # what the topic holds per key before a re-base (retraction.py)
                   "held": "__logstore_held"}
UNCOMMITTED_SUFFIX = "__logstore_uncommitted"  # a killed insert's output, removed by recovery
GC_SUFFIX = "__gc"  # after a leftover's name: a table pointed at its directory to drop it
# `<model>` + these + `<upstream>`: the upstream's changes landed for a downstream model, and the
# temporary view over them (impl.logstore_source_changes).
SOURCE_RAW_INFIX = "__logstore_src_"
SOURCE_VIEW_INFIX = "__logstore_changes_"

# Columns of a change table (changes writes them, log_snapshots.Attempt.records_sql reads them):
# op 'c' insert, 'u' update, 'd' delete ('x': changes.OP_DUPLICATE); key, the JSON object of
# the unique_key columns or NULL for keyless models; before / after, the JSON image of the old
# row (NULL for inserts) / the new row (NULL for deletes).
CHANGE_COLUMNS = ("__logstore_op", "__logstore_key", "__logstore_before", "__logstore_after")
# Scratch columns of the adapter's SQL (changes, source_changes), never stored: under the mark,
# so that no model column clashes with them.
SCRATCH_ROW = "__logstore_row"
SCRATCH_KEY = "__logstore_k"
SCRATCH_REPEATED = "__logstore_repeated"
SCRATCH_RANK = "__logstore_rank"

# Columns a downstream model reads from logstore_changes(ref(...)) (source_changes writes them,
# users' models and impl.logstore_upserts_sql read them): the op ('r', 'c', 'u', 'd') and the
# upstream snapshot; columns under the prefix are dropped from the rows a model keeps.
VIEW_OP_COLUMN = "_logstore_op"
VIEW_SNAPSHOT_COLUMN = "_logstore_snapshot"
VIEW_COLUMN_PREFIX = "_logstore_"
