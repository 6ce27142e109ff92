"""The benchmarks (docs/performance.md). Each script runs by path (`python benchmarks/mirror.py`,
as the Makefile's bench targets do) and imports the shared pieces from this package: harness.py
(child processes, brokers, the machine's figures), projects.py (the dbt project, profile and
runs), tables.py (rates, table cells, printed tables, results files)."""
