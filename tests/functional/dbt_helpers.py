"""Small helpers for running dbt in functional tests."""
from dbt.tests.util import run_dbt_and_capture


def failure_text(args):
    """The error text of a dbt command that must fail, at parse time (raised) or at run time,
    with whitespace collapsed so messages can be matched across line breaks."""
    try:
        _, out = run_dbt_and_capture(args, expect_pass=False)
    except Exception as exc:  # parse-time errors abort the whole invocation
        out = str(exc)
    return " ".join(out.split())
