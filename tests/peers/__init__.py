"""Peer decoders: programs of other projects that read dbt-logstore topics, run by the tests as
subprocesses in their own environments (see tests/functional/flink_peer.py)."""
