"""dbt's reduced-input run modes (--empty, --sample) as run_modes.py reads them."""
from types import SimpleNamespace

from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.commit.run_modes import (
    limit_zero_sql, not_logged, not_logged_explanation, reduced_inputs,
)

LOG = LogConfig(model="customers", system="kafka", topic="crm.customers")


def test_the_flags_of_reduced_input_runs():
    assert reduced_inputs(SimpleNamespace(EMPTY=True, SAMPLE=None)) == "--empty"
    assert reduced_inputs(SimpleNamespace(EMPTY=False, SAMPLE=object())) == "--sample"
    assert reduced_inputs(SimpleNamespace(EMPTY=False, SAMPLE=None)) is None
    assert reduced_inputs(SimpleNamespace()) is None  # flags of a command without them (dbt show)


def test_the_query_is_run_for_no_rows_whatever_its_last_line():
    sql = limit_zero_sql("select 1 as a -- a trailing comment")
    assert sql.endswith("\n) as logstore_reduced_run limit 0")


def test_the_run_result_and_the_console_say_why_nothing_was_logged():
    existing, created = not_logged(LOG, "--empty", False), not_logged(LOG, "--empty", True)
    assert existing.rows_mirrored == 0 and existing.log_skipped == "--empty"
    assert existing.topic == "crm.customers"
    assert existing._message.startswith("NOT LOGGED (--empty)")
    assert "left the table and its log as they are" in existing._message
    assert "its log starts at its first full run" in created._message
    line = not_logged_explanation(LOG, "--sample")
    assert "customers: not logged" in line and "sample window" in line and "crm.customers" in line
