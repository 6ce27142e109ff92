"""A dbt project seen from outside a dbt run (the `dbt-logstore tail MODEL` and `status`
commands): its logged models, resolved through the project's manifest and profile as dbt
itself resolves them, and a connection to its warehouse through the logstore adapter."""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from dbt.adapters.logstore.commit import table_snapshot
from dbt.adapters.logstore.spark import table_formats
from dbt.adapters.logstore.spark.catalog import parse_properties
from dbt.adapters.logstore.spark.engine_output import spark_running, stderr_to
from dbt.adapters.logstore.config.address import servers_setting_of, with_servers_setting
from dbt.adapters.logstore.config.options import LOGGABLE_RESOURCES
from dbt.adapters.logstore.config.log_config import LogConfig, node_config
from dbt.adapters.logstore.config.continuation import continue_stored_shape
from dbt.adapters.logstore.config.project_runtime import runtime_config
from dbt.adapters.logstore.names import SNAPSHOT_ID
from dbt.adapters.logstore.formats import decode_json
from dbt.adapters.logstore.reading.reader import ReaderError, UsageError
from dbt.adapters.logstore.spark.row_source import iter_query_rows


class TableReadError(ReaderError):
    """A table or the catalog could not be read (the message says why, in one line)."""


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "msg", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def metastore_in_use(session_dir: Optional[str]) -> Optional[str]:
    """The session method's Derby metastore directory when another process has booted it
    (Derby holds an exclusive lock on its dbex.lck while booted), else None."""
    import fcntl

    if not session_dir or spark_running():
        return None  # this process's own Spark holds it, if anyone does
    database = Path(session_dir) / "metastore_db"
    lock = database / "dbex.lck"
    if not lock.exists():
        return None
    try:
        with open(lock, "rb+") as handle:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(handle, fcntl.LOCK_UN)
    except OSError:
        return str(database)
    return None


@dataclass(frozen=True)
class LoggedModel:
    name: str
    relation: str  # schema.table
    log: LogConfig

    @property
    def table_id(self) -> str:
        """The table's name in record headers and confirmations."""
        return self.relation


def _profiles_dir(project_dir: Path, profiles_dir: Optional[str]) -> str:
    """Where dbt would look: --profiles-dir, DBT_PROFILES_DIR, the project, then ~/.dbt."""
    if profiles_dir:
        return str(profiles_dir)
    if os.environ.get("DBT_PROFILES_DIR"):
        return os.environ["DBT_PROFILES_DIR"]
    if (project_dir / "profiles.yml").exists():
        return str(project_dir)
    return str(Path.home() / ".dbt")


class DbtProject:
    def __init__(self, project_dir: str = ".", profiles_dir: Optional[str] = None,
                 target: Optional[str] = None, vars: Optional[Dict[str, Any]] = None,
                 engine_log: Optional[Path] = None) -> None:
        """`engine_log`: a file for what Spark, its JVM and Derby print while the connection
        is open (the CLI's: the terminal gets only the command's own lines)."""
        self.engine_log = engine_log
        self.project_dir = Path(project_dir).resolve()
        if not (self.project_dir / "dbt_project.yml").exists():
            raise UsageError(f"No dbt project at {self.project_dir} (no dbt_project.yml): run "
                             f"the command in the project's directory, or pass --project-dir.")
        self.profiles_dir = _profiles_dir(self.project_dir, profiles_dir)
        self.target, self.vars = target, vars or {}
        self._adapter: Any = None
        self._manifest: Any = None

    def _cli_args(self) -> List[str]:
        args = ["--project-dir", str(self.project_dir), "--profiles-dir", self.profiles_dir]
        if self.target:
            args += ["--target", self.target]
        if self.vars:
            args += ["--vars", json.dumps(self.vars)]
        return args

    @property
    def manifest(self) -> Any:
        if self._manifest is None:
            from dbt.cli.main import dbtRunner

            # nothing on the console (its error is raised below, in one line); dbt.log as usual
            result = dbtRunner().invoke(["parse", "--log-level", "none",
                                         "--log-level-file", "debug", *self._cli_args()])
            if not result.success:
                raise ReaderError(f"dbt could not parse the project at {self.project_dir}: "
                                  f"{getattr(result.exception, 'msg', result.exception)}")
            self._manifest = result.result
        return self._manifest

    @property
    def adapter(self) -> Any:
        if self._adapter is None:
            from dbt.adapters.factory import get_adapter, register_adapter
            from dbt.mp_context import get_mp_context

            self.manifest  # parse first: dbt's own invocation resets the adapters it made
            config = runtime_config(str(self.project_dir), self.profiles_dir, self.target,
                                    self.vars)
            register_adapter(config, get_mp_context())
            self._adapter = get_adapter(config)
            self._adapter.set_macro_resolver(self.manifest)
        return self._adapter

    @property
    def run_topic_parts(self) -> Tuple[str, str]:
        """The project's name and its target's schema: its run topic's (names.run_topic_for)."""
        return str(self.adapter.config.project_name), str(self.adapter.config.credentials.schema)

    def logged_models(self) -> List[LoggedModel]:
        models = []
        for node in self.manifest.nodes.values():
            if node.resource_type not in LOGGABLE_RESOURCES:
                continue
            log = self.adapter.logstore_config(node)
            if log.enabled:
                # its errors name the setting its servers came from: the model's or the profile's
                log = with_servers_setting(log, servers_setting_of(node_config(node)))
                models.append(LoggedModel(node.name, f"{node.schema}.{node.alias}", log))
        return sorted(models, key=lambda m: m.name)

    def model(self, name: str) -> Optional[LoggedModel]:
        return next((m for m in self.logged_models() if m.name == name), None)

    def has_loggable(self, name: str) -> bool:
        """A model, seed or snapshot of that name, logged or not."""
        return any(node.name == name and node.resource_type in LOGGABLE_RESOURCES
                   for node in self.manifest.nodes.values())

    @contextmanager
    def connection(self) -> Iterator[Any]:
        credentials = self.adapter.config.credentials
        if str(getattr(credentials, "method", "")) in ("session", "SparkConnectionMethod.SESSION"):
            holder = metastore_in_use(getattr(credentials, "session_dir", None))
            if holder is not None:
                raise TableReadError(
                    f"The Spark metastore at {holder} is in use by another process (a dbt run of "
                    f"this project?): the session method's Derby metastore admits one process at "
                    f"a time, so the tables cannot be read now. Run this again when that process "
                    f"has finished.")
        with stderr_to(self.engine_log), self.adapter.connection_named("dbt-logstore"):
            yield self.adapter

    def _relation(self, relation: str) -> Any:
        schema, _, identifier = relation.partition(".")
        try:  # dbt's listing of the schema: no query of a table that may not exist
            return self.adapter.get_relation(database=None, schema=schema, identifier=identifier)
        except Exception as exc:
            raise TableReadError(f"Could not read the catalog of schema {schema}: "
                                 f"{_first_line(exc)}") from None

    def table_properties(self, relation: str) -> Optional[Dict[str, str]]:
        """The table's properties, None when it does not exist; TableReadError (one line) when
        it cannot be read (never "does not exist" for a table that could not be read)."""
        if self._relation(relation) is None:
            return None
        try:
            _, table = self.adapter.execute(f"show tblproperties {relation}", fetch=True)
        except Exception as exc:
            raise TableReadError(f"Could not read table {relation}: {_first_line(exc)}") from None
        return parse_properties(table.rows)

    def relation_exists(self, relation: str) -> bool:
        return self._relation(relation) is not None

    def table_columns(self, model: LoggedModel) -> Tuple[List[str], List[str]]:
        """The table's column names and Spark types, in table order."""
        columns = self.adapter.get_columns_in_relation(
            self.adapter.Relation.create(schema=model.relation.split(".")[0],
                                         identifier=model.relation.split(".")[1]))
        return [c.name for c in columns], [c.dtype for c in columns]

    def snapshot_rows(self, model: LoggedModel) -> Tuple[int, Iterator[Tuple[Any, Dict[str, Any]]]]:
        """The table's current snapshot id and its rows as (key, row) JSON images, encoded as the
        log encodes them. Fails when the table holds a commit its log does not have yet."""
        props = self.table_properties(model.relation)
        if props is None:
            raise ReaderError(f"Model '{model.name}': table {model.relation} does not exist yet.")
        try:
            snapshot, version = table_snapshot.readable_snapshot(props, model.name)
        except table_snapshot.UnloggedCommit as exc:
            raise ReaderError(f"Model {exc}") from None
        names, types = self.table_columns(model)
        images = continue_stored_shape(model.log, props)[0].images  # as this table's log writes them
        type_of = dict(zip(names, types))
        key = (images.object_sql(model.log.unique_key, types=[type_of.get(k, "") for k in model.log.unique_key])
               if model.log.keyed else "cast(null as string)")
        sql = (f"select {key}, {images.object_sql(names, types=types)} "
               f"from {table_formats.as_of(model.relation, version)}")
        handle = self.adapter.connections.get_thread_connection().handle

        def rows() -> Iterator[Tuple[Any, Dict[str, Any]]]:
            for key_json, row_json in iter_query_rows(handle, sql):
                yield decode_json(key_json.encode()) if key_json else None, decode_json(row_json.encode())
            if version is not None:
                return  # read as of the snapshot's own table version
            after = self.table_properties(model.relation) or {}
            if int(after.get(SNAPSHOT_ID) or 0) != snapshot:
                raise ReaderError(f"Model '{model.name}': the table changed while it was read "
                                  f"(snapshot {snapshot} -> {after.get(SNAPSHOT_ID)}); "
                                  f"read again.")

        return snapshot, rows()
