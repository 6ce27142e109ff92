"""The `dbt-logstore` command line: its commands, their arguments, how they end, an error's
wording outside a dbt run, and the embedded development broker."""


def main(argv=None):  # `dbt.adapters.logstore.cli:main`, the entry point before the move
    from dbt.adapters.logstore.cli.commands import main as run

    return run(argv)
