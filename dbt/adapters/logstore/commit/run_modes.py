"""dbt's run modes that build models from reduced inputs, and what a logged model does in them.

`dbt run --empty` (refs and sources read as zero rows) and `dbt run --sample` (refs and sources
cut to a time window) build a model from part of its inputs. Their rows are not the model's rows:
a logged table replaced by them would log the deletion of every row it held (a keyed table of 20
rows logged 20 deletes and 20 tombstones under `dbt run --empty`), and no consumer can take that
back. So in these modes a logged model never reaches its log: its SQL is checked against Spark
(analysed and run for no rows), an existing table and its log stay as they are, and a first build
creates the table with the model's columns and no rows, without a log, so that the models
downstream of it can be checked too (`dbt build --empty`). Its log starts at its first full run,
with the table's rows then (none), as any log that starts on an existing table does.
"""
from __future__ import annotations

from typing import Any, Optional

from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.commit.mirror import LogstoreAdapterResponse

# dbt's flag -> what it does to a model's inputs
REDUCED_INPUT_FLAGS = {
    "--empty": "refs and sources read as zero rows",
    "--sample": "refs and sources cut to the sample window",
}


def reduced_inputs(flags: Any) -> Optional[str]:
    """The flag of the run mode that builds models from reduced inputs (a key of
    REDUCED_INPUT_FLAGS), or None for a run from full inputs. `flags`: dbt's global flags."""
    if getattr(flags, "EMPTY", False):
        return "--empty"
    if getattr(flags, "SAMPLE", None) is not None:
        return "--sample"
    return None


def limit_zero_sql(sql: str) -> str:
    """The model's query analysed and run for no rows. The line break before the closing
    parenthesis keeps a trailing `-- comment` of the model from swallowing it."""
    return f"select * from (\n{sql}\n) as logstore_reduced_run limit 0"


def not_logged(log: LogConfig, flag: str, created: bool) -> LogstoreAdapterResponse:
    """The run result of a logged model in a reduced-input run: nothing written, and why."""
    done = ("created the table with no rows and no log; its log starts at its first full run"
            if created else "left the table and its log as they are")
    return LogstoreAdapterResponse(
        _message=f"NOT LOGGED ({flag}): SQL checked, {done}",
        rows_affected=0, rows_mirrored=0, topic=log.topic, log_skipped=flag,
    )


def not_logged_explanation(log: LogConfig, flag: str) -> str:
    """The console line that says why a logged model wrote nothing to its log."""
    return (f"{log.model}: not logged: dbt {flag} builds from reduced inputs "
            f"({REDUCED_INPUT_FLAGS[flag]}); replacing the table with them would send consumers of "
            f"{log.topic} the deletion of rows the model still has")
