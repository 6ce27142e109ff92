"""What the plain modules (run_lock, leftovers, mirror, table_commit, ...) need of dbt's adapter:
statements on the model thread's connection, their rows, a table's properties, row count and
columns, a relation looked up by name. The adapter hands one over (LogstoreAdapter._catalog), so
those modules never see dbt's adapter machinery."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.logstore.spark.json_images import sql_string

# the adapter's log lines (dbt's log and console), for every module that reports a step
logger = AdapterLogger("logstore")


def parse_properties(rows: Iterable[Any]) -> Dict[str, str]:
    """`SHOW TBLPROPERTIES` rows -> dict."""
    return {str(r[0]): str(r[1]) for r in rows}


class Catalog:
    def __init__(self, execute: Callable[..., Any], get_relation: Optional[Callable[..., Any]] = None,
                 get_columns: Optional[Callable[[Any], Any]] = None) -> None:
        # dbt's adapter.execute(sql, fetch=...), get_relation, get_columns_in_relation
        self._execute, self._get_relation, self._get_columns = execute, get_relation, get_columns

    def run(self, sql: str) -> None:
        self._execute(sql)

    def rows(self, sql: str) -> List[Sequence[Any]]:
        _, table = self._execute(sql, fetch=True)
        return list(table.rows)

    def properties(self, relation: Any) -> Dict[str, str]:
        """`SHOW TBLPROPERTIES` as a dict."""
        return parse_properties(self.rows(f"show tblproperties {relation}"))

    def row_count(self, relation: Any) -> int:
        return int(self.rows(f"select count(*) from {relation}")[0][0])

    def columns(self, relation: Any) -> List[Tuple[str, str]]:
        """(name, Spark type) of each column."""
        return [(c.name, c.dtype) for c in self._get_columns(relation)]

    def column_names(self, relation: Any) -> List[str]:
        """The column names of a table given by its name as text (`columns` needs dbt's
        relation object), read from an empty query of it."""
        _, table = self._execute(f"select * from {relation} limit 0", fetch=True)
        return [str(name) for name in table.column_names]

    def sibling(self, relation: Any, identifier: str) -> Optional[Any]:
        """The relation `identifier` in `relation`'s schema, if it exists."""
        return self._get_relation(relation.database, relation.schema, identifier)


def properties_list_sql(properties: Mapping[str, str]) -> str:
    """A `tblproperties` list: `('key' = 'value', ...)`, quoted and escaped."""
    return "(" + ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in properties.items()) + ")"


def set_properties_sql(relation: Any, properties: Mapping[str, str]) -> str:
    return f"alter table {relation} set tblproperties {properties_list_sql(properties)}"


def insert_batches_sql(relation: str, rows: Iterator[Tuple[Any, ...]], batch: int = 500) -> Iterator[str]:
    """INSERT statements for raw rows read by dbt (thrift: dbt cannot run tasks on the server)."""
    def lit(v: Any) -> str:
        return "null" if v is None else (str(v) if isinstance(v, int) else sql_string(str(v)))

    values: List[str] = []
    for row in rows:
        values.append("(" + ", ".join(lit(v) for v in row) + ")")
        if len(values) >= batch:
            yield f"insert into {relation} values " + ", ".join(values)
            values = []
    if values:
        yield f"insert into {relation} values " + ", ".join(values)
