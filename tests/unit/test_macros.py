"""The logstore macros rendered without Spark, Kafka or a dbt run (as dbt-spark's
tests/unit/test_macros.py does), against a fake adapter and context that record every call.

How the materializations are rendered: the way dbt itself does, with dbt's own Jinja machinery
rather than a pre-processing step. Each macro file is split into its top-level `macro` and
`materialization` blocks with dbt_common.clients.jinja.extract_toplevel_blocks (as dbt's
MacroParser does); each block is compiled in dbt's environment (get_environment():
jinja2.ext.do plus dbt's MaterializationExtension, which turns
`{% materialization table, adapter='logstore' %}` into the macro
`materialization_table_logstore`); and each is put into one shared context as a
dbt_common BaseMacroGenerator, which is how dbt calls one macro from another: a fresh module
over the live context for every call, `return(x)` raising MacroReturn and the generator
handing back x itself (a relation, a dict), not its text. So macros call each other across
files as in a dbt run. Unlike dbt, undefined names are StrictUndefined: a macro that uses a
name this harness does not provide fails here instead of rendering "".

dbt-spark's incremental SQL macros (strategies.sql, validate.sql, partition_cols) and dbt's
get_merge_sql / get_merge_update_columns are loaded unchanged, so the tests check the real
insert / merge statement a logged incremental model runs. Everything else the macros call
(statement, run_hooks, create_table_as, the dbt-spark materializations, the adapter) is a fake
that appends to one ordered list of calls, which the tests assert on. The fake adapter's
log config is the real one (log_config.resolve_log_config), and its methods keep the
parameters of dbt/adapters/logstore/impl.py (checked by the first test).
"""
from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

import jinja2
import pytest
from dbt.adapters.spark.column import SparkColumn
from dbt.adapters.spark.relation import SparkRelation
from dbt_common.clients import jinja as dbt_jinja
from dbt_common.clients.jinja import BaseMacroGenerator
from dbt_common.exceptions import CompilationError, DbtRuntimeError, MacroReturn

import dbt.include.global_project
import dbt.include.spark
from dbt.adapters.logstore.commit import snapshots as log_snapshots
from dbt.adapters.logstore import names
from dbt.adapters.logstore.spark.catalog import set_properties_sql
from dbt.adapters.logstore.commit.protocol import LogLost
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.log.lifecycle.identity import Assessment
from dbt.adapters.logstore.impl import LogstoreAdapter, ModelRunState
from dbt.adapters.logstore.commit.run_record import RunWatch
from dbt.adapters.logstore.commit.mirror import LogstoreAdapterResponse
from dbt.adapters.logstore.config.log_config import LogConfigError, ModelRef, resolve_log_config

LOGSTORE_MACROS = Path(__file__).resolve().parents[2] / "dbt" / "include" / "logstore" / "macros"
SPARK_MACROS = Path(dbt.include.spark.__file__).parent / "macros"
CORE_MACROS = Path(dbt.include.global_project.__file__).parent / "macros"
MACRO_FILES = [
    CORE_MACROS / "materializations" / "models" / "incremental" / "merge.sql",
    CORE_MACROS / "materializations" / "models" / "incremental" / "column_helpers.sql",
    SPARK_MACROS / "adapters.sql",
    SPARK_MACROS / "materializations" / "incremental" / "strategies.sql",
    SPARK_MACROS / "materializations" / "incremental" / "validate.sql",
    *sorted(LOGSTORE_MACROS.rglob("*.sql")),
]

INVOCATION = "inv-1"
SCHEMA = "analytics"
COMPILED = "select id, amount, day from analytics.raw_orders"
TARGET = "analytics.orders"
STAGING = "analytics.orders__logstore_new"
CHANGES = "analytics.orders__logstore_changes"
UPSERTS = "analytics.orders__logstore_upserts"
MERGED = "analytics.orders__logstore_merged"
SPARK_RESULT = {"relations": ["built by dbt-spark"]}


# --- loading the macros as dbt does ---------------------------------------------------------

ENV = dbt_jinja.get_environment()  # dbt's: jinja2.ext.do, materialization/test/docs blocks
ENV.undefined = jinja2.StrictUndefined


def _macro_sources() -> Dict[str, str]:
    """Each top-level macro/materialization block of MACRO_FILES, by the name dbt gives it."""
    sources: Dict[str, str] = {}
    for path in MACRO_FILES:
        for block in dbt_jinja.extract_toplevel_blocks(
                path.read_text(), allowed_blocks={"macro", "materialization"}, collect_raw_data=False):
            (node,) = dbt_jinja.parse(block.full_block).find_all(jinja2.nodes.Macro)
            sources[node.name[len("dbt_macro__"):]] = block.full_block
    return sources


SOURCES = _macro_sources()


@functools.lru_cache(maxsize=None)
def _template(name: str) -> jinja2.Template:
    return ENV.from_string(SOURCES[name])


class Macro(BaseMacroGenerator):
    """A macro as dbt's context holds it: called, it renders against the shared context."""

    def __init__(self, name: str, context: Dict[str, Any]) -> None:
        super().__init__(context)
        self.name = name

    def get_name(self) -> str:
        return self.name

    def get_template(self) -> jinja2.Template:
        return _template(self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call_macro(*args, **kwargs)


# --- the fakes ----------------------------------------------------------------------------

@dataclass
class Call:
    name: str
    args: Dict[str, Any]

    def matches(self, name: str, where: Dict[str, Any]) -> bool:
        return self.name == name and all(str(self.args.get(k)) == str(v) for k, v in where.items())


def _sql(text: Any) -> str:
    return " ".join(str(text).split())


def relation(identifier: str, type: str = "table") -> SparkRelation:
    """A relation of the fake catalog: its type, or 'iceberg'/'delta' for a table of that format."""
    if type in ("iceberg", "delta"):
        return SparkRelation.create(schema=SCHEMA, identifier=identifier, type="table",
                                    is_iceberg=type == "iceberg", is_delta=type == "delta")
    return SparkRelation.create(schema=SCHEMA, identifier=identifier, type=type)


def recorded(method):
    """Record the call, its arguments bound by parameter name (defaults applied): a macro that
    passes arguments the method does not take fails here as it would against the adapter."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        self.calls.append(Call(f"adapter.{method.__name__}", arguments))
        return method(self, *args, **kwargs)

    return wrapper


class FakeAdapter:
    """The @available methods the macros call, with impl.py's parameters and plausible typed
    results; relations live in a small catalog (identifier -> type) that creates, renames and
    drops keep up to date."""

    COLUMNS = [SparkColumn(column="id", dtype="int"), SparkColumn(column="amount", dtype="double"),
               SparkColumn(column="day", dtype="date")]

    def _run_state(self) -> ModelRunState:  # the model run's state, as impl.py keeps it
        return self.__dict__.setdefault("_state", ModelRunState())

    # the invocation's manifest, as impl.py keeps it (no upstream nodes: no logged inputs)
    _run_watch = RunWatch()

    def _catalog(self):
        return None  # never read: a model without logged inputs reads no table's properties

    def __init__(self, calls: List[Call], context: Dict[str, Any], catalog: Dict[str, str],
                 log_is_new: bool = False, pending: Optional[str] = None,
                 interrupted: Optional[str] = None, op_column: bool = False,
                 reduced_inputs: str = "", assessment: Optional[Assessment] = None) -> None:
        self.calls, self.context, self.catalog = calls, context, dict(catalog)
        self.log_is_new, self.pending, self.interrupted, self.op_column = \
            log_is_new, pending, interrupted, op_column
        self.reduced_inputs = reduced_inputs
        self.assessment = assessment or Assessment()  # the log is the table's (lifecycle/)
        self.generation = None

    # dbt's adapter
    def dispatch(self, macro_name: str, macro_namespace: Optional[str] = None, packages: Any = None):
        for prefix in ("logstore__", "spark__", "default__"):
            if prefix + macro_name in self.context:
                return self.context[prefix + macro_name]
        raise CompilationError(f"no implementation of {macro_name}")

    @recorded
    def get_relation(self, database, schema, identifier):
        kind = self.catalog.get(identifier)
        return None if kind is None else relation(identifier, kind)

    @recorded
    def drop_relation(self, relation):
        self.catalog.pop(relation.identifier, None)

    @recorded
    def rename_relation(self, from_relation, to_relation):
        self.catalog[to_relation.identifier] = self.catalog.pop(from_relation.identifier, "table")

    def get_columns_in_relation(self, relation):
        return list(self.COLUMNS)

    # logstore's: the protocol's names, impl's own (lookups, not steps: not recorded)
    def logstore_names(self):
        return LogstoreAdapter.logstore_names(self)

    def logstore_relation(self, target_relation, kind):
        return LogstoreAdapter.logstore_relation(self, target_relation, kind)

    @recorded
    def logstore_own_relations(self, target_relation):
        prefix = f"{target_relation.identifier}__logstore_"
        return {name.lower() for name in self.catalog if name.startswith(prefix)}

    def logstore_changeset_id(self, invocation_id, node):
        return LogstoreAdapter.logstore_changeset_id(self, invocation_id, node)

    # dbt's, for seeds
    def convert_type(self, agate_table, index):
        return agate_table.types[index]

    def quote_seed_column(self, column, quote_config):
        return column

    @recorded
    def add_query(self, sql, bindings=None, abridge_sql_log=False):
        return None

    # dbt's, for snapshots
    @recorded
    def valid_snapshot_target(self, relation, column_names=None):
        return None

    @recorded
    def logstore_snapshot_rows_sql(self, old_relation, staging_relation, columns, valid_to_current=None):
        return f"select * from {old_relation} /* as the snapshot merge of {staging_relation} leaves it */"

    # logstore's: runs from reduced inputs
    @recorded
    def logstore_reduced_inputs(self):
        return self.reduced_inputs

    def logstore_limit_zero_sql(self, sql):
        return LogstoreAdapter.logstore_limit_zero_sql(self, sql)

    @recorded
    def logstore_not_logged(self, log, flag, created):
        return LogstoreAdapterResponse(_message=f"NOT LOGGED ({flag})", rows_mirrored=0)

    def execute(self, sql):
        # whitespace collapsed, line comments dropped (dbt's get_merge_sql starts with one)
        self.calls.append(Call("adapter.execute", {"sql": _sql(re.sub(r"--[^\n]*", "", sql))}))

    # logstore's commit protocol: the real sequence (commit/protocol.py) over this fake's steps
    @recorded
    def logstore_begin(self, log, target_relation, partition_by, invocation_id, changeset, resnapshot=False,
                       depends_on=None):
        self.depends_on = depends_on  # what the macro handed over of the model's upstreams
        return LogstoreAdapter.logstore_begin(self, log, target_relation, partition_by, invocation_id,
                                              changeset, resnapshot, depends_on)

    @recorded
    def logstore_build_changes(self, log, changes_relation, new_relation, old_relation=None, scope_by=None,
                               changeset="", scope_relation=None, unique_check=False, shape_of=None):
        return LogstoreAdapter.logstore_build_changes(self, log, changes_relation, new_relation, old_relation,
                                                      scope_by, changeset, scope_relation, unique_check, shape_of)

    @recorded
    def logstore_commit_by_swap(self, log, staged_relation, target_relation, old_relation, changes_relation,
                                changeset, partitions, rows_affected, file_format=None, replace_clauses="",
                                model_properties=None):
        return LogstoreAdapter.logstore_commit_by_swap(
            self, log, staged_relation, target_relation, old_relation, changes_relation, changeset, partitions,
            rows_affected, file_format, replace_clauses, model_properties)

    @recorded
    def logstore_commit_by_statement(self, log, target_relation, staged_relation, existing_relation,
                                     changes_relation, changeset, partitions, statement, rows_affected,
                                     replaced_by=None, replaces_rows=True):
        return LogstoreAdapter.logstore_commit_by_statement(
            self, log, target_relation, staged_relation, existing_relation, changes_relation, changeset,
            partitions, statement, rows_affected, replaced_by, replaces_rows)

    @recorded
    def logstore_set_properties(self, relation, properties):
        return ""

    # logstore's: config and the steps before the commit
    @recorded
    def logstore_config(self, node):
        config = dict(node["config"])
        ref = ModelRef(name=node["name"], schema=node["schema"], alias=node["alias"],
                       materialized=str(config.get("materialized")),
                       incremental_strategy=config.get("incremental_strategy"))
        return resolve_log_config(ref, config, profile_bootstrap_servers="localhost:9092")

    @recorded
    def logstore_continue_log(self, log, target_relation):
        return log

    @recorded
    def logstore_check_catalog(self, log, partition_by):
        return ""

    @recorded
    def logstore_lock(self, log, target_relation, invocation_id):
        return f"{target_relation}__logstore_lock"

    @recorded
    def logstore_release_lock(self):
        return ""

    @recorded
    def logstore_unlock(self, target_relation):
        return "no lock was held"

    @recorded
    def logstore_prepare(self, log):
        return log.partitions

    @recorded
    def logstore_assess_log(self, log, target_relation, relation):
        return self.assessment

    @recorded
    def logstore_start_generation(self, start):
        self.generation = start

    @recorded
    def logstore_interrupted_swap(self, changes_relation, target_relation):
        return None if self.interrupted is None else relation(self.interrupted)

    @recorded
    def logstore_log_is_new(self, log, relation, topic_partitions):
        return self.log_is_new

    @recorded
    def logstore_pending_changeset(self, changes_relation, target_relation, log_starts=False):
        return self.pending

    @recorded
    def logstore_settle_sources(self, relation, changeset):
        return None

    @recorded
    def logstore_create(self, relation, sql):
        self.catalog[relation.identifier] = "table"
        return ""

    @recorded
    def logstore_has_op_column(self, relation):
        return self.op_column

    @recorded
    def logstore_upserts_sql(self, relation):
        return f"select `id`, `amount`, `day` from {relation} where _logstore_op <> 'd'"

    @recorded
    def logstore_upserted_rows_sql(self, log, new_relation, old_relation, replaced=None):
        return f"select * from {old_relation} /* upserted with {new_relation} */"

    @recorded
    def logstore_readable_table_options(self):
        return "options ('maxRecordsPerFile' = '100000')"

    @recorded
    def logstore_change_sql(self, log, new_relation, old_relation=None, scope_by=None,
                            scope_relation=None, mark_duplicates=False, shape_of=None):
        return f"select * from {new_relation} /* changes */"

    @recorded
    def logstore_check_unique(self, log, relation, appended_to=None):
        return None

    @recorded
    def logstore_check_change_set(self, log, changes_relation, marked_duplicates=False, new_relation=None, failed=False):
        return None

    @recorded
    def logstore_retract(self, log, changes_relation):
        return None

    @recorded
    def logstore_row_count(self, relation):
        return 7

    @recorded
    def logstore_crash_point(self, point):
        return ""

    @recorded
    def logstore_hold_lock(self, log):
        return None

    def logstore_replaces_in_place(self, file_format, old_relation):
        from dbt.adapters.logstore.spark.table_formats import replaces_in_place

        return replaces_in_place(file_format, old_relation)  # the fake's relations say their format

    @recorded
    def logstore_intent_properties(self, new_relation, old_relation, new_rows, replaced_by=None,
                                   replaces_rows=True):
        return {names.INTENT_ROWS_BEFORE: "10", names.INTENT_ROWS_AFTER: "17"}

    @recorded
    def logstore_properties(self, log, changeset_id=None, topic_partitions=None, carry_from=None,
                            record_sources=True):
        props = log.table_properties()
        if changeset_id:
            props[names.COMMITTED] = changeset_id
        if topic_partitions:
            props[names.TOPIC_PARTITIONS] = str(topic_partitions)
        return props

    # logstore's: after the commit
    @recorded
    def logstore_mirror(self, log, changes_relation, target_relation, changeset, rows_affected=None,
                        recovering=False, log_starts=False, committed_properties=None):
        return LogstoreAdapterResponse(_message="OK", rows_affected=rows_affected, rows_mirrored=5,
                                       topic=log.topic, log_snapshot=4, log_end_offsets={"0": 12},
                                       log_attempt="attempt-1")

    @recorded
    def logstore_snapshot_properties(self, response, changeset):
        return log_snapshots.Snapshot(id=response.log_snapshot, attempt=response.log_attempt,
                                        end_offsets={0: 12}).properties(changeset)


class AnyOf:
    def __getitem__(self, types: Any) -> Any:
        return types


class FakeConfig:
    def __init__(self, values: Dict[str, Any]) -> None:
        self.values = values

    def get(self, name: str, default: Any = None, validator: Any = None) -> Any:
        return self.values.get(name, default)


class Harness:
    """One model's context: the macros, the fakes, and the calls they record in order."""

    def __init__(self, materialized: str, existing: Optional[Dict[str, str]] = None,
                 full_refresh: bool = False,
                 adapter_options: Optional[Dict[str, Any]] = None, **config: Any) -> None:
        self.calls: List[Call] = []
        config = {"materialized": materialized, **config}
        self.model = {"name": "orders", "alias": "orders", "schema": SCHEMA, "database": None,
                      "resource_type": "model", "language": "sql", "config": config}
        ctx: Dict[str, Any] = {}
        self.adapter = FakeAdapter(self.calls, ctx, existing or {}, **(adapter_options or {}))
        ctx.update({name: Macro(name, ctx) for name in SOURCES})
        ctx.update(
            adapter=self.adapter, config=FakeConfig(config), model=self.model,
            this=relation("orders"), schema=SCHEMA, database=None, invocation_id=INVOCATION,
            compiled_code=COMPILED, pre_hooks=[], post_hooks=[], execute=True, sql_header=None,
            target=SimpleNamespace(endpoint=None), graph={"nodes": {"model.p.orders": self.model}},
            api=SimpleNamespace(Relation=SparkRelation),
            validation=SimpleNamespace(any=AnyOf()),  # dbt-spark's validation.any[list, basestring]
            exceptions=SimpleNamespace(raise_compiler_error=self._raise),
            should_full_refresh=lambda: full_refresh,
            load_relation=lambda rel: self.adapter.get_relation(rel.database, rel.schema,
                                                                rel.identifier),
            incremental_validate_on_schema_change=lambda value, default="ignore": value or default,
            create_table_as=lambda temporary, rel, sql, language="sql": f"create table {rel} as {sql}",
        )
        ctx["return"] = self._return
        for name in ("log", "run_hooks", "store_result", "process_schema_changes", "should_revoke",
                     "apply_grants", "persist_docs", "persist_constraints",
                     "materialization_table_spark", "materialization_incremental_spark",
                     "materialization_view_spark", "materialization_seed_default",
                     "materialization_snapshot_spark"):
            ctx[name] = self._recorder(name)
        ctx["statement"] = self._statement
        self.context = ctx

    @staticmethod
    def _return(value: Any) -> None:
        raise MacroReturn(value)

    @staticmethod
    def _raise(message: str) -> None:
        raise CompilationError(message)

    def _recorder(self, name: str):
        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(Call(name, {"args": args, **kwargs}))
            return SPARK_RESULT if name.startswith("materialization_") else ""
        return record

    def _statement(self, name=None, fetch_result=False, auto_begin=True, language="sql", caller=None):
        # whitespace collapsed, line comments dropped (dbt's get_merge_sql starts with one)
        sql = _sql(re.sub(r"--[^\n]*", "", caller()))
        self.calls.append(Call("statement", {"name": name, "sql": sql}))
        return ""

    # running and reading what happened
    def materialize(self) -> Any:
        return self.context[f"materialization_{self.model['config']['materialized']}_logstore"]()

    def call(self, macro: str, *args: Any, **kwargs: Any) -> Any:
        return self.context[macro](*args, **kwargs)

    def names(self) -> List[str]:
        return [c.name for c in self.calls]

    def adapter_calls(self) -> List[str]:
        return [n for n in self.names() if n.startswith("adapter.")]

    def all(self, name: str, /, **where: Any) -> List[Call]:
        return [c for c in self.calls if c.matches(name, where)]

    def one(self, name: str, /, **where: Any) -> Call:
        found = self.all(name, **where)
        assert len(found) == 1, (name, where, found)
        return found[0]

    def index(self, name: str, /, after: int = -1, **where: Any) -> int:
        """The position of the first matching call after position `after` (-1 if none)."""
        return next((i for i, c in enumerate(self.calls) if i > after and c.matches(name, where)), -1)

    def statements(self) -> List[str]:
        return [c.args["sql"] for c in self.all("statement")]

    def tblproperties(self, relation_name: str) -> List[str]:
        """The `alter table ... set tblproperties` statements of `relation_name`, in order."""
        return [set_properties_sql(c.args["relation"], c.args["properties"])
                for c in self.all("adapter.logstore_set_properties", relation=relation_name)]

    def executed(self) -> List[str]:
        """What the protocol ran itself (commit_protocol: the table commit's statements)."""
        return [c.args["sql"] for c in self.all("adapter.execute")]


def kafka(**config: Any) -> Dict[str, Any]:
    """A logged model's config: log.system kafka, keyed by id, a topic of 3 partitions."""
    return {"log.system": "kafka", "unique_key": "id", "log.system.partitions": 3, **config}


def in_order(h: Harness, *steps: tuple) -> None:
    """Each (name, {where}) step happens, after the one before it."""
    position = -1
    for name, where in steps:
        position = h.index(name, after=position, **where)
        assert position >= 0, f"no {name} {where} after the steps before it, in {h.names()}"


# --- the fake keeps step with the adapter ---------------------------------------------------

def test_fake_adapter_keeps_the_parameters_of_impl():
    for name, method in vars(FakeAdapter).items():
        if name.startswith("logstore_"):
            real = getattr(LogstoreAdapter, name)
            assert list(inspect.signature(method).parameters) == \
                list(inspect.signature(real).parameters), name


def test_every_adapter_method_the_macros_call_exists():
    called = {m for path in LOGSTORE_MACROS.rglob("*.sql")
              for m in re.findall(r"\badapter\.(\w+)", path.read_text())}
    assert {"logstore_begin", "logstore_commit_by_swap", "logstore_commit_by_statement",
            "logstore_create"} <= called
    assert sorted(m for m in called if not hasattr(LogstoreAdapter, m)) == []
    # Jinja reaches only @available methods; the protocol's steps are Python's alone
    assert sorted(m for m in called if m not in LogstoreAdapter._available_) == []
    assert not {"logstore_mirror", "logstore_lock", "logstore_set_properties"} & set(LogstoreAdapter._available_)


def test_the_adapter_names_the_models_own_relations_and_refuses_an_unknown_kind():
    # in a macro, an unknown key of a names dict would render '' and name the model's table
    kinds = {kind: str(LogstoreAdapter.logstore_relation(None, relation("orders"), kind))
             for kind in ("changes", "new", "merged", "upserts")}
    assert kinds == {"changes": CHANGES, "new": STAGING, "merged": MERGED, "upserts": UPSERTS}
    with pytest.raises(DbtRuntimeError, match="no relation of kind 'lock'"):
        LogstoreAdapter.logstore_relation(None, relation("orders"), "lock")


# --- table --------------------------------------------------------------------------------

def test_unlogged_table_is_dbt_sparks_and_touches_no_log():
    h = Harness("table")
    assert h.materialize() == SPARK_RESULT
    assert h.adapter_calls() == ["adapter.logstore_config"]
    assert "materialization_table_spark" in h.names() and h.statements() == []


def test_logged_table_first_build():
    h = Harness("table", **kafka())
    assert [str(r) for r in h.materialize()["relations"]] == [TARGET]
    # the log is ready and the lock taken before anything is built
    in_order(h, ("adapter.logstore_check_catalog", {}), ("adapter.logstore_lock", {}),
             ("adapter.logstore_prepare", {}), ("adapter.logstore_create", {"relation": STAGING}))
    assert _sql(h.one("adapter.logstore_create", relation=STAGING).args["sql"]) == \
        f"create table {STAGING} as {COMPILED}"
    change = h.one("adapter.logstore_change_sql")
    assert str(change.args["new_relation"]) == STAGING and change.args["old_relation"] is None
    # no old rows: the change set's query counts the keys too, no query of its own
    assert change.args["mark_duplicates"] is True and h.all("adapter.logstore_check_unique") == []
    created = _sql(h.one("adapter.logstore_create", relation=CHANGES).args["sql"])
    assert created.startswith(
        f"create table {CHANGES} using parquet options ('maxRecordsPerFile' = '100000') "
        f"tblproperties ('logstore.changeset.id' = '{INVOCATION}') as select case when ")
    # the checks inside the change set's own query (change_checks.checked_sql)
    assert "raise_error(" in created and created.endswith(f"from (select * from {STAGING} /* changes */)")
    tag, snapshot = h.tblproperties(STAGING)[0], h.tblproperties(TARGET)[0]
    assert f"'logstore.changeset.committed' = '{INVOCATION}'" in tag
    assert "'kafka.topic' = 'analytics.orders'" in tag and "'logstore.topic.partitions' = '3'" in tag
    assert "'logstore.snapshot.id' = '4'" in snapshot
    assert f"'logstore.changeset.mirrored' = '{INVOCATION}'" in snapshot
    mirror = h.one("adapter.logstore_mirror")
    assert (str(mirror.args["changes_relation"]), str(mirror.args["target_relation"]),
            mirror.args["changeset"], mirror.args["rows_affected"]) == (CHANGES, TARGET, INVOCATION, None)
    assert h.all("adapter.logstore_row_count") == []  # no count: dbt-spark reports none either
    assert not mirror.args["recovering"] and not mirror.args["log_starts"]
    # a plain table's committed properties are the ones its tag wrote: the log write reads none
    assert mirror.args["committed_properties"] == h.one("adapter.logstore_set_properties",
                                                        relation=STAGING).args["properties"]
    assert str(h.one("adapter.logstore_check_change_set").args["new_relation"]) == STAGING
    in_order(h, ("adapter.logstore_check_change_set", {}),
             ("adapter.logstore_crash_point", {"point": "before_table_commit"}),
             ("adapter.logstore_hold_lock", {}),
             ("adapter.logstore_set_properties", {"relation": STAGING}),
             ("adapter.rename_relation", {"from_relation": STAGING, "to_relation": TARGET}),
             ("adapter.logstore_crash_point", {"point": "after_table_commit"}),
             ("adapter.logstore_hold_lock", {}),
             ("adapter.logstore_mirror", {}), ("adapter.logstore_hold_lock", {}),
             ("adapter.logstore_set_properties", {"relation": TARGET}),
             ("adapter.drop_relation", {"relation": CHANGES}), ("store_result", {}))
    assert len(h.all("adapter.logstore_hold_lock")) == 3  # before each change of table or log
    assert h.one("store_result").args["response"].log_snapshot == 4
    assert h.all("adapter.drop_relation", relation=TARGET) == []  # nothing old to drop


def test_logged_table_rebuild_diffs_before_the_swap_and_mirrors_after_it():
    h = Harness("table", existing={"orders": "table"}, **kafka())
    h.materialize()
    change = h.one("adapter.logstore_change_sql")
    assert str(change.args["old_relation"]) == TARGET
    assert change.args["mark_duplicates"] is True  # the diff finds repeated keys itself
    assert h.all("adapter.logstore_check_unique") == []
    assert str(h.one("adapter.logstore_properties", changeset_id=INVOCATION).args["carry_from"]) == TARGET
    in_order(h, ("adapter.logstore_create", {"relation": CHANGES}),
             ("adapter.logstore_check_change_set", {}),
             ("adapter.drop_relation", {"relation": TARGET}),
             ("adapter.logstore_crash_point", {"point": "mid_swap"}),
             ("adapter.rename_relation", {"from_relation": STAGING, "to_relation": TARGET}),
             ("adapter.logstore_mirror", {}))


@pytest.mark.parametrize("file_format,existing", [("iceberg", "iceberg"), ("delta", "delta"),
                                                  ("delta", None)])
def test_a_versioned_table_is_rebuilt_in_one_replace_that_tags_it_and_keeps_its_history(file_format, existing):
    h = Harness("table", existing={"orders": existing} if existing else {}, file_format=file_format,
                tblproperties={"owner": "team-a"}, **kafka())
    h.context.update(file_format_clause=lambda: f"using {file_format}", options_clause=lambda: "",
                     partition_cols=lambda label: "", clustered_cols=lambda label: "",
                     location_clause=lambda: "", comment_clause=lambda: "")
    h.materialize()
    [replace] = h.executed()
    assert replace.startswith(f"create or replace table {TARGET} using {file_format} tblproperties (")
    assert replace.endswith(f"as select * from {STAGING}")
    # the rows and their change-set tag in one commit, next to the model's own properties
    assert f"'logstore.changeset.committed' = '{INVOCATION}'" in replace
    assert "'owner' = 'team-a'" in replace
    assert h.all("adapter.drop_relation", relation=TARGET) == []  # never dropped ...
    assert h.all("adapter.rename_relation") == []  # ... nor swapped: its history stays
    assert h.tblproperties(STAGING) == []
    # the rows staged in a parquet table of the adapter's own, then dropped
    staged = _sql(h.one("adapter.logstore_create", relation=STAGING).args["sql"])
    assert staged.startswith(f"create table {STAGING} using parquet"), staged
    in_order(h, ("adapter.logstore_check_change_set", {}), ("adapter.execute", {"sql": replace}),
             ("adapter.drop_relation", {"relation": STAGING}), ("adapter.logstore_mirror", {}))
    # the format's version is read from the table itself by the log write
    assert h.one("adapter.logstore_mirror").args["committed_properties"] is None


@pytest.mark.parametrize("existing", [{"orders": "table"}, {"orders": "iceberg"}, {"orders": "view"}])
def test_a_table_is_swapped_when_there_is_no_table_of_the_models_format_to_replace(existing):
    # a parquet table (or a view) that becomes a Delta one: Delta replaces only its own
    h = Harness("table", existing=existing, file_format="delta", **kafka())
    h.materialize()
    assert h.executed() == []
    h.one("adapter.rename_relation", from_relation=STAGING, to_relation=TARGET)


def test_logged_table_of_logstore_changes_keeps_the_upserts():
    h = Harness("table", adapter_options={"op_column": True}, **kafka())
    h.materialize()
    upserts = h.one("adapter.logstore_create", relation=UPSERTS).args["sql"]
    assert _sql(upserts) == (f"create table {UPSERTS} as select `id`, `amount`, `day` from {STAGING} "
                             f"where _logstore_op <> 'd'")
    assert str(h.one("adapter.logstore_change_sql").args["new_relation"]) == UPSERTS
    in_order(h, ("adapter.drop_relation", {"relation": STAGING}),
             ("adapter.rename_relation", {"from_relation": UPSERTS, "to_relation": TARGET}))


# --- runs from reduced inputs (dbt --empty, --sample) ---------------------------------------

REDUCED_RUN_CALLS = ["adapter.logstore_config", "adapter.logstore_reduced_inputs",
                     "adapter.get_relation"]


@pytest.mark.parametrize("materialized", ["table", "incremental"])
def test_a_reduced_input_run_checks_the_sql_and_leaves_an_existing_table_and_log(materialized):
    h = Harness(materialized, existing={"orders": "table"}, adapter_options={"reduced_inputs": "--empty"},
                **kafka(incremental_strategy="merge"))
    assert [str(r) for r in h.materialize()["relations"]] == [TARGET]
    # no lock, no broker, no recovery, no mirror: only the query analysed and run for no rows
    assert h.adapter_calls() == REDUCED_RUN_CALLS + ["adapter.logstore_not_logged"]
    assert h.statements() == [f"select * from ( {COMPILED} ) as logstore_reduced_run limit 0"]
    assert h.one("adapter.logstore_not_logged").args["created"] is False
    assert h.one("store_result").args["response"].rows_mirrored == 0
    in_order(h, ("run_hooks", {}), ("statement", {"name": "main"}), ("store_result", {}),
             ("run_hooks", {}))


@pytest.mark.parametrize("op_column", [False, True])
def test_a_reduced_input_first_build_creates_the_table_empty_and_without_a_log(op_column):
    h = Harness("table", adapter_options={"reduced_inputs": "--sample", "op_column": op_column},
                **kafka())
    h.materialize()
    assert h.one("adapter.logstore_create").args["sql"] == (
        f"create table {STAGING} as select * from (\n{COMPILED}\n) as logstore_reduced_run limit 0")
    rows = (f"select `id`, `amount`, `day` from {STAGING} where _logstore_op <> 'd'" if op_column
            else f"select * from {STAGING}")
    assert h.statements() == [f"create table {TARGET} as {rows}"]
    assert str(h.one("adapter.drop_relation").args["relation"]) == STAGING
    assert h.one("adapter.logstore_not_logged").args["created"] is True
    assert not {"adapter.logstore_lock", "adapter.logstore_prepare", "adapter.logstore_mirror",
                "adapter.logstore_properties"} & set(h.adapter_calls())


# --- incremental --------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["append", "insert_overwrite", "merge"])
def test_unlogged_incremental_is_dbt_sparks_and_touches_no_log(strategy):
    h = Harness("incremental", existing={"orders": "table"}, incremental_strategy=strategy,
                unique_key="id", file_format="delta")
    assert h.materialize() == SPARK_RESULT
    assert h.adapter_calls() == ["adapter.logstore_config"]
    assert h.statements() == [] and "materialization_incremental_spark" in h.names()


def logged_incremental(strategy: str, **config: Any) -> Harness:
    h = Harness("incremental", existing={"orders": "table"}, incremental_strategy=strategy, **kafka(**config))
    assert [str(r) for r in h.materialize()["relations"]] == [TARGET]
    return h


def assert_commits_by_statement(h: Harness, main: str) -> None:
    """The intent is tagged, the statement runs, the commit is tagged, then the log is written."""
    assert h.executed() == [main]
    intent, committed, snapshot = h.tblproperties(TARGET)
    assert f"'logstore.changeset.intent' = '{INVOCATION}'" in intent
    assert "'logstore.intent.rows_after' = '17'" in intent
    assert f"'logstore.changeset.committed' = '{INVOCATION}'" in committed
    assert "'logstore.snapshot.id' = '4'" in snapshot
    in_order(h, ("adapter.logstore_create", {"relation": STAGING}),
             ("adapter.logstore_check_change_set", {}),
             ("adapter.logstore_set_properties", {"relation": TARGET}),
             ("adapter.logstore_crash_point", {"point": "incremental_intent"}),
             ("adapter.execute", {"sql": main}),
             ("adapter.logstore_crash_point", {"point": "incremental_commit"}),
             ("adapter.logstore_set_properties", {"relation": TARGET}), ("adapter.logstore_mirror", {}),
             ("adapter.logstore_set_properties", {"relation": TARGET}),
             ("adapter.drop_relation", {"relation": CHANGES}),
             ("adapter.drop_relation", {"relation": STAGING}))
    assert h.all("adapter.drop_relation", relation=TARGET) == []
    assert h.one("adapter.logstore_mirror").args["rows_affected"] == 7


def test_logged_incremental_append():
    h = logged_incremental("append")
    assert_commits_by_statement(
        h, f"insert into table {TARGET} select `id`, `amount`, `day` from {STAGING}")
    assert str(h.one("adapter.logstore_check_unique").args["appended_to"]) == TARGET
    change = h.one("adapter.logstore_change_sql")
    assert change.args["old_relation"] is None and str(change.args["shape_of"]) == TARGET
    assert h.one("adapter.logstore_intent_properties").args["replaces_rows"] is False


def test_logged_incremental_insert_overwrite():
    h = logged_incremental("insert_overwrite", partition_by="day")
    assert h.statements()[0] == "set spark.sql.sources.partitionOverwriteMode = DYNAMIC"
    assert_commits_by_statement(
        h, f"insert overwrite table {TARGET} partition (day) select `id`, `amount`, `day` from {STAGING}")
    change = h.one("adapter.logstore_change_sql")
    assert (str(change.args["old_relation"]), change.args["scope_by"], change.args["mark_duplicates"]) == \
        (TARGET, ("day",), True)
    intent = h.one("adapter.logstore_intent_properties")
    assert intent.args["replaced_by"] == ("day",) and intent.args["replaces_rows"] is True
    assert h.one("adapter.logstore_check_catalog").args["partition_by"] == "day"


def test_logged_microbatch_batch_overwrites_its_partitions_as_a_change_set_of_its_own():
    h = Harness("incremental", existing={"orders": "table"}, incremental_strategy="microbatch",
                **kafka(partition_by="day"))
    h.model["batch"] = {"id": "20240102", "event_time_start": "2024-01-02", "event_time_end": "2024-01-03"}
    h.materialize()
    batch = f"{INVOCATION}-batch-20240102"
    assert h.statements()[0] == "set spark.sql.sources.partitionOverwriteMode = DYNAMIC"
    assert h.executed() == \
        [f"insert overwrite table {TARGET} partition (day) select `id`, `amount`, `day` from {STAGING}"]
    change = h.one("adapter.logstore_change_sql")
    assert (str(change.args["old_relation"]), change.args["scope_by"]) == (TARGET, ("day",))
    intent, committed, _ = h.tblproperties(TARGET)
    assert f"'logstore.changeset.intent' = '{batch}'" in intent
    assert f"'logstore.changeset.committed' = '{batch}'" in committed
    assert h.one("adapter.logstore_mirror").args["changeset"] == batch
    assert f"'logstore.changeset.id' = '{batch}'" in h.one("adapter.logstore_create", relation=CHANGES).args["sql"]


def test_logged_incremental_merge_on_delta_runs_merge_into():
    h = logged_incremental("merge", file_format="delta")
    assert_commits_by_statement(h, (
        f"merge into {TARGET} as DBT_INTERNAL_DEST using {STAGING} as DBT_INTERNAL_SOURCE "
        f"on DBT_INTERNAL_SOURCE.id = DBT_INTERNAL_DEST.id when matched then update set "
        f"`id` = DBT_INTERNAL_SOURCE.`id`, `amount` = DBT_INTERNAL_SOURCE.`amount`, "
        f"`day` = DBT_INTERNAL_SOURCE.`day` when not matched then insert *"))
    # the diff counts the new keys in its own shuffle: no uniqueness query of its own
    assert h.all("adapter.logstore_check_unique") == []
    change = h.one("adapter.logstore_change_sql")
    assert (str(change.args["new_relation"]), str(change.args["old_relation"]),
            change.args["scope_by"], str(change.args["scope_relation"]), change.args["mark_duplicates"]) == \
        (STAGING, TARGET, ("id",), STAGING, True)
    assert h.one("adapter.logstore_intent_properties").args["replaced_by"] == ("id",)
    assert h.all("adapter.rename_relation") == []


def test_logged_incremental_merge_on_parquet_rewrites_and_swaps():
    h = logged_incremental("merge")  # parquet: no MERGE INTO in Spark
    assert h.executed() == []
    assert _sql(h.one("adapter.logstore_create", relation=MERGED).args["sql"]) == \
        f"create table {MERGED} as select * from {TARGET} /* upserted with {STAGING} */"
    in_order(h, ("adapter.logstore_check_change_set", {}),
             ("adapter.logstore_create", {"relation": MERGED}),
             ("adapter.drop_relation", {"relation": TARGET}),
             ("adapter.rename_relation", {"from_relation": MERGED, "to_relation": TARGET}),
             ("adapter.logstore_mirror", {}), ("adapter.drop_relation", {"relation": STAGING}))
    assert f"'logstore.changeset.committed' = '{INVOCATION}'" in h.tblproperties(MERGED)[0]


def test_logged_incremental_merge_of_logstore_changes_deletes_by_rewrite():
    h = Harness("incremental", existing={"orders": "table"}, incremental_strategy="merge",
                file_format="delta", adapter_options={"op_column": True}, **kafka())
    h.materialize()
    assert h.executed() == []  # not MERGE INTO: it cannot delete the 'd' keys
    upserted = h.one("adapter.logstore_upserted_rows_sql")
    assert (str(upserted.args["new_relation"]), str(upserted.args["replaced"])) == (UPSERTS, STAGING)
    change = h.one("adapter.logstore_change_sql")
    assert (str(change.args["new_relation"]), str(change.args["scope_relation"])) == (UPSERTS, STAGING)
    # each key once in the rows given, deletes included: a query of its own
    assert str(h.one("adapter.logstore_check_unique").args["relation"]) == STAGING
    assert change.args["mark_duplicates"] is False
    in_order(h, ("adapter.rename_relation", {"from_relation": MERGED, "to_relation": TARGET}),
             ("adapter.logstore_mirror", {}), ("adapter.drop_relation", {"relation": STAGING}),
             ("adapter.drop_relation", {"relation": UPSERTS}))


@pytest.mark.parametrize("existing,full_refresh", [({}, False), ({"orders": "table"}, True),
                                                   ({"orders": "view"}, False)])
def test_logged_incremental_builds_the_whole_table_like_a_table(existing, full_refresh):
    h = Harness("incremental", existing=existing, full_refresh=full_refresh,
                incremental_strategy="append", **kafka())
    h.materialize()
    assert h.executed() == []
    prior = h.one("adapter.logstore_change_sql").args["old_relation"]
    assert str(prior) == (TARGET if existing.get("orders") == "table" else "None")
    in_order(h, ("adapter.logstore_check_change_set", {}),
             ("adapter.rename_relation", {"from_relation": STAGING, "to_relation": TARGET}),
             ("adapter.logstore_mirror", {}))


# --- what a run settles first (logstore_begin) ---------------------------------------------

def test_a_log_that_starts_now_first_receives_the_tables_rows():
    h = Harness("table", existing={"orders": "table"}, adapter_options={"log_is_new": True}, **kafka())
    h.materialize()
    start = f"{INVOCATION}-start"
    first = h.all("adapter.logstore_change_sql")[0]
    assert str(first.args["new_relation"]) == TARGET and first.args["old_relation"] is None
    start_changes = h.all("adapter.logstore_create", relation=CHANGES)[0]
    assert f"'logstore.changeset.id' = '{start}'" in start_changes.args["sql"]
    assert h.one("adapter.logstore_properties", changeset_id=start).args["record_sources"] is False
    in_order(h, ("adapter.logstore_mirror", {"changeset": start, "log_starts": True}),
             ("adapter.logstore_create", {"relation": STAGING}),
             ("adapter.logstore_mirror", {"changeset": INVOCATION, "log_starts": False}))


def test_a_failed_runs_committed_change_set_is_sent_again_first():
    h = Harness("table", existing={"orders": "table", "orders__logstore_changes": "table"},
                adapter_options={"pending": "inv-0"}, **kafka())
    h.materialize()
    in_order(h, ("adapter.logstore_settle_sources", {"changeset": "inv-0"}),
             ("adapter.logstore_mirror", {"changeset": "inv-0", "recovering": True}),
             ("adapter.drop_relation", {"relation": CHANGES}),
             ("adapter.logstore_create", {"relation": STAGING}))


def test_a_failed_runs_swap_is_finished_first():
    h = Harness("table", existing={"orders__logstore_changes": "table", "orders__logstore_new": "table"},
                adapter_options={"interrupted": "orders__logstore_new"}, **kafka())
    h.materialize()
    renames = [(str(c.args["from_relation"]), str(c.args["to_relation"]))
               for c in h.all("adapter.rename_relation")]
    assert renames == [(STAGING, TARGET), (STAGING, TARGET)]  # the failed run's, then this run's
    assert str(h.one("adapter.logstore_log_is_new").args["relation"]) == TARGET
    in_order(h, ("adapter.logstore_interrupted_swap", {}), ("adapter.rename_relation", {}),
             ("adapter.logstore_create", {"relation": STAGING}))


def test_tblproperties_values_are_escaped():
    assert set_properties_sql(relation("orders"), {"a": "it's", "b": "c:\\d"}) == \
        f"alter table {TARGET} set tblproperties ('a' = 'it\\'s', 'b' = 'c:\\\\d')"


# --- no log: views, seeds, snapshots --------------------------------------------------------

class FakeAgateTable:
    column_names = ("id", "name")
    types = ("bigint", "string")
    rows = [(1, "a"), (2, "b"), (3, "c")]


def test_a_logged_seed_stages_its_csv_diffs_it_and_swaps_it_in():
    h = Harness("seed", existing={"orders": "table"}, **kafka())
    h.context.update(load_agate_table=lambda: FakeAgateTable(), get_batch_size=lambda: 2,
                     get_binding_char=lambda: "%s", file_format_clause=lambda: "using parquet",
                     partition_cols=lambda label: "", clustered_cols=lambda label: "",
                     comment_clause=lambda: "")
    assert [str(r) for r in h.materialize()["relations"]] == [TARGET]
    assert _sql(h.one("adapter.logstore_create", relation=STAGING).args["sql"]) == \
        f"create table {STAGING} (id bigint, name string) using parquet"
    inserts = h.all("adapter.add_query")  # the CSV's rows in batches of get_batch_size()
    assert [len(c.args["bindings"]) for c in inserts] == [4, 2]
    assert _sql(inserts[0].args["sql"]) == (f"insert into {STAGING} values "
                                            "(cast(%s as bigint),cast(%s as string)), (cast(%s as bigint),cast(%s as string))")
    change = h.one("adapter.logstore_change_sql")
    assert (str(change.args["new_relation"]), str(change.args["old_relation"])) == (STAGING, TARGET)
    in_order(h, ("adapter.logstore_lock", {}), ("adapter.logstore_prepare", {}),
             ("adapter.logstore_create", {"relation": STAGING}), ("adapter.add_query", {}),
             ("adapter.logstore_check_change_set", {}), ("adapter.drop_relation", {"relation": TARGET}),
             ("adapter.rename_relation", {}), ("adapter.logstore_mirror", {}))
    assert h.one("adapter.logstore_mirror").args["rows_affected"] == 3


def snapshot_harness(existing):
    h = Harness("snapshot", existing=existing, **kafka(strategy="timestamp"))
    columns = {"dbt_scd_id": "dbt_scd_id", "dbt_valid_to": "dbt_valid_to"}
    h.context.update(
        get_or_create_relation=lambda database, schema, identifier, type: (
            bool(existing), relation(identifier)),
        get_snapshot_table_column_names=lambda: columns,
        strategy_dispatch=lambda name: (lambda *args: {"name": name}),
        build_snapshot_table=lambda strategy, sql: f"select *, 'scd' as dbt_scd_id from ({sql})",
        spark_build_snapshot_staging_table=lambda strategy, sql, target: relation("orders__dbt_tmp", "view"),
        post_snapshot=h._recorder("post_snapshot"), sql=COMPILED)
    h.model["compiled_code"] = COMPILED
    h.materialize()
    return h


def test_a_logged_snapshots_first_build_stages_dbts_snapshot_table_keyed_by_scd_id():
    h = snapshot_harness({})
    assert h.one("adapter.logstore_config").args  # the key is dbt_scd_id: test_log_config.py
    assert h.one("adapter.logstore_create", relation=STAGING).args["sql"] == \
        f"create table {STAGING} as select *, 'scd' as dbt_scd_id from ({COMPILED})"
    change = h.one("adapter.logstore_change_sql")
    assert change.args["old_relation"] is None
    in_order(h, ("adapter.logstore_lock", {}), ("adapter.logstore_create", {"relation": STAGING}),
             ("adapter.logstore_check_change_set", {}), ("adapter.rename_relation", {}),
             ("adapter.logstore_mirror", {}))


def test_a_logged_snapshot_stages_what_its_merge_would_leave_and_swaps_it_in():
    h = snapshot_harness({"orders": "table"})
    rows = h.one("adapter.logstore_snapshot_rows_sql")
    assert (str(rows.args["old_relation"]), str(rows.args["staging_relation"])) == (TARGET, "analytics.orders__dbt_tmp")
    assert h.executed() == []  # no MERGE into the snapshot's table
    in_order(h, ("adapter.logstore_prepare", {}), ("adapter.valid_snapshot_target", {}),
             ("adapter.logstore_create", {"relation": STAGING}), ("post_snapshot", {}),
             ("adapter.logstore_change_sql", {"old_relation": TARGET}),
             ("adapter.drop_relation", {"relation": TARGET}), ("adapter.rename_relation", {}),
             ("adapter.logstore_mirror", {}))


@pytest.mark.parametrize("materialized,spark", [("view", "materialization_view_spark"),
                                                ("seed", "materialization_seed_default"),
                                                ("snapshot", "materialization_snapshot_spark")])
def test_views_seeds_snapshots_check_the_config_then_are_dbt_sparks(materialized, spark):
    h = Harness(materialized)
    assert h.materialize() == SPARK_RESULT
    assert h.names() == ["adapter.logstore_config", spark]


@pytest.mark.parametrize("existing,full_refresh,refused", [({}, False, True), ({"orders": "table"}, True, True),
                                                          ({"orders": "table"}, False, False)])
def test_clone_of_a_logged_model_is_refused_where_it_would_replace_the_table(existing, full_refresh, refused):
    h = Harness("table", existing=existing, **kafka())
    h.context.update(defer_relation=relation("orders_prod"), flags=SimpleNamespace(FULL_REFRESH=full_refresh),
                     load_cached_relation=h.context["load_relation"],
                     materialization_clone_spark=h._recorder("materialization_clone_spark"))
    if refused:
        with pytest.raises(CompilationError, match="Model 'orders' has a log .* dbt clone would make"):
            h.context["materialization_clone_logstore"]()
        assert "materialization_clone_spark" not in h.names()
    else:  # the table exists: dbt-spark's clone does nothing
        h.context["materialization_clone_logstore"]()
        assert "materialization_clone_spark" in h.names()


def test_a_log_on_a_view_is_refused_before_anything_is_built():
    h = Harness("view", **{"log.system": "kafka"})
    with pytest.raises(LogConfigError, match="not supported on materialized='view'"):
        h.materialize()
    assert "materialization_view_spark" not in h.names()


# --- run-operations -------------------------------------------------------------------------

def test_recover_settles_the_model_then_releases_its_lock():
    h = Harness("table", existing={"orders": "table"}, **kafka())
    h.call("logstore_recover", "orders")
    assert h.adapter_calls()[-1] == "adapter.logstore_release_lock"
    in_order(h, ("adapter.logstore_lock", {"target_relation": TARGET}), ("adapter.logstore_prepare", {}),
             ("adapter.logstore_release_lock", {}))
    assert h.all("adapter.logstore_create") == []  # nothing is built


def test_recover_checks_the_catalog_with_the_model_s_partitions():
    h = Harness("table", existing={"orders": "table"}, partition_by=["day"], **kafka())
    h.call("logstore_recover", "orders")
    in_order(h, ("adapter.logstore_check_catalog", {"partition_by": ["day"]}), ("adapter.logstore_lock", {}))


def test_recover_refuses_a_model_without_a_log():
    h = Harness("table")
    with pytest.raises(Exception, match="has no log to recover"):
        h.call("logstore_recover", "orders")
    with pytest.raises(Exception, match="no model named 'nope'"):
        h.call("logstore_recover", "nope")


# --- the log's life: a lost log, checked before anything changes (lifecycle/) ------------------

LOST = Assessment(findings=("the topic 'analytics.orders' no longer exists (deleted)",),
                  next_start=GenerationStart(2, 7, {0: 0}))


def test_a_lost_log_stops_the_run_before_anything_changes():
    h = Harness("table", existing={"orders": "table"}, adapter_options={"assessment": LOST}, **kafka())
    with pytest.raises(LogLost, match="no longer exists.*Nothing was changed.*log.on-lost: restart"):
        h.materialize()
    after = h.index("adapter.logstore_assess_log")
    assert after >= 0 and h.index("adapter.logstore_lock") < after
    changed = {"adapter.logstore_prepare", "adapter.logstore_create", "adapter.logstore_set_properties",
               "adapter.execute", "adapter.drop_relation", "adapter.rename_relation",
               "adapter.logstore_mirror"}
    assert not changed & set(h.names()[after:])


def test_a_lost_log_restarts_as_a_generation_of_the_tables_rows_first():
    h = Harness("table", existing={"orders": "table"}, adapter_options={"assessment": LOST},
                **kafka(**{"log.on-lost": "restart"}))
    h.materialize()
    start = f"{INVOCATION}-start"
    in_order(h, ("adapter.logstore_assess_log", {}), ("adapter.logstore_prepare", {}),
             ("adapter.logstore_start_generation", {"start": LOST.next_start}),
             ("adapter.logstore_mirror", {"changeset": start, "log_starts": True}),
             ("adapter.logstore_start_generation", {"start": None}),
             ("adapter.logstore_mirror", {"changeset": INVOCATION, "log_starts": False}))


def test_without_a_table_the_runs_own_build_starts_the_generation():
    h = Harness("table", adapter_options={"assessment": LOST}, **kafka(**{"log.on-lost": "restart"}))
    h.materialize()
    assert [c.args["start"] for c in h.all("adapter.logstore_start_generation")] == [LOST.next_start]
    assert [c.args["changeset"] for c in h.all("adapter.logstore_mirror")] == [INVOCATION]
    in_order(h, ("adapter.logstore_start_generation", {}), ("adapter.logstore_properties",
                                                           {"changeset_id": INVOCATION}))
    # the generation's change set also retracts what the topic holds of the lost log, before
    # its checks and its table commit
    in_order(h, ("adapter.logstore_start_generation", {}), ("adapter.logstore_create", {}),
             ("adapter.logstore_retract", {"changes_relation": CHANGES}),
             ("adapter.logstore_check_change_set", {}))


def test_a_generation_falls_due_on_its_schedule_without_a_lost_log():
    due = Assessment(due=True, next_start=GenerationStart(3, 9))
    h = Harness("table", existing={"orders": "table"}, adapter_options={"assessment": due}, **kafka())
    h.materialize()
    assert h.one("adapter.logstore_mirror", changeset=f"{INVOCATION}-start").args["log_starts"] is True


def test_resnapshot_starts_a_generation_and_releases_the_lock():
    h = Harness("table", existing={"orders": "table"}, **kafka())
    h.call("logstore_resnapshot", "orders")
    in_order(h, ("adapter.logstore_lock", {}),
             ("adapter.logstore_start_generation", {"start": Assessment().next_start}),
             ("adapter.logstore_mirror", {"changeset": f"{INVOCATION}-start", "log_starts": True}),
             ("adapter.logstore_release_lock", {}))


def test_a_run_that_fails_its_checks_leaves_nothing_it_staged(monkeypatch):
    # "Nothing was changed" holds for the user's schema too: the staged rows and the change set go
    def refuse(self, log, changes_relation, marked_duplicates=False, new_relation=None):
        raise DbtRuntimeError("Model 'orders': a record is too large. Nothing was changed.")

    monkeypatch.setattr(FakeAdapter, "logstore_check_change_set", refuse)
    h = Harness("table", existing={"orders": "table"}, **kafka())
    with pytest.raises(DbtRuntimeError, match="Nothing was changed"):
        h.materialize()
    dropped = [str(c.args["relation"]) for c in h.all("adapter.drop_relation")]
    assert CHANGES in dropped and STAGING in dropped and TARGET not in dropped
    assert "orders__logstore_new" not in h.adapter.catalog and "orders" in h.adapter.catalog


def test_a_change_set_query_stopped_by_its_checks_is_explained_and_nothing_is_left(monkeypatch):
    # the checks run inside the change table's own query; when one stops it, the checks run over
    # that query without them to say which check failed and on which keys
    from dbt.adapters.logstore.changes.checks import CHECK_FAILED
    create, explained = FakeAdapter.logstore_create, []

    def stopped(self, relation, sql):
        if str(relation) == CHANGES:
            raise DbtRuntimeError(f"[USER_RAISED_EXCEPTION] {CHECK_FAILED} SQLSTATE: P0001")
        return create(self, relation, sql)

    def explain(self, log, changes_relation, marked_duplicates=False, new_relation=None, failed=False):
        explained.append((changes_relation, marked_duplicates, failed))
        raise DbtRuntimeError("Model 'orders': a record is too large. Nothing was changed.")

    monkeypatch.setattr(FakeAdapter, "logstore_create", stopped)
    monkeypatch.setattr(FakeAdapter, "logstore_check_change_set", explain)
    h = Harness("table", existing={"orders": "table"}, **kafka())
    with pytest.raises(DbtRuntimeError, match="a record is too large"):
        h.materialize()
    assert explained == [(f"(select * from {STAGING} /* changes */)", True, True)]
    dropped = [str(c.args["relation"]) for c in h.all("adapter.drop_relation")]
    assert CHANGES in dropped and STAGING in dropped and TARGET not in dropped


def test_a_models_build_hands_its_upstreams_to_begin_and_an_operation_none():
    h = Harness("table", **kafka())
    h.model["depends_on"] = {"nodes": ["model.p.customers", "source.p.raw.orders"]}
    h.materialize()
    assert h.adapter.depends_on == ["model.p.customers", "source.p.raw.orders"]
    h = Harness("table", **kafka())
    h.model["resource_type"] = "operation"  # run-operation logstore_resnapshot: not a build
    h.materialize()
    assert h.adapter.depends_on is None
