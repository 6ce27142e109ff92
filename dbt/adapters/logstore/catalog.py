"""What the plain modules (run_lock, leftovers, mirror) need of dbt's adapter: statements on the
model thread's connection, their rows, a table's properties and row count. The adapter hands
one over (LogstoreAdapter._catalog), so those modules never see dbt's adapter machinery."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.logstore.commit_protocol import parse_properties

# the adapter's log lines (dbt's log and console), for every module that reports a step
logger = AdapterLogger("logstore")


class Catalog:
    def __init__(self, execute: Callable[..., Any]) -> None:
        self._execute = execute  # dbt's adapter.execute(sql, fetch=...)

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
