"""An error's sentence outside a dbt run (issue 44, item 3): its own words, its right subject,
no "Nothing was changed." from a command that changes nothing."""
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.cli.error_wording import own_text, reworded


def test_dbts_error_without_its_heading():
    exc = DbtRuntimeError("Model 'customers': Kafka at 'h:1':\n  unreachable.")
    assert str(exc).startswith("Runtime Error")
    assert own_text(exc) == "Model 'customers': Kafka at 'h:1': unreachable."


def test_dbt_debug_is_not_a_model():
    text = "Model 'dbt debug': Kafka at 'h:1': unreachable: no broker answered. Nothing was changed."
    assert reworded(text, "dbt debug", "dbt debug") == (
        "dbt debug: Kafka at 'h:1': unreachable: no broker answered.")


def test_only_the_subject_at_the_start_is_renamed():
    text = "Model 'orders': the topic of Model 'orders' is gone."
    assert reworded(text, "orders", "Topic 'orders'") == "Topic 'orders': the topic of Model 'orders' is gone."
    assert reworded(text) == text  # no subject given: kept


def test_a_command_that_changes_something_keeps_its_sentence():
    text = "Model 'm': refused. Nothing was changed."
    assert reworded(text, read_only=False) == text
