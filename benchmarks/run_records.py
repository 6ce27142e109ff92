"""What a run record costs (docs/performance.md), side by side in one run, on a three-node
Apache Kafka cluster of its own (tests/kafka_cluster.py):

- writing one record (commit/run_record.write_run_record: the run topic's check and one
  transaction), `--writes` times;
- the latest confirmations of the models an invocation did not build, for `--topics` control
  topics of three confirmations each: one consumer for all (run_record.latest_confirmations,
  what a run does) against one consumer each (the reader's control_records, as a run did first).

Prints the seconds; `make bench-run-records`."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbt.adapters.logstore.commit import run_record  # noqa: E402
from dbt.adapters.logstore.log.log_system import open_model_log  # noqa: E402
from dbt.adapters.logstore.log.run_records import ModelAtRun, RunRecord  # noqa: E402
from dbt.adapters.logstore.reading.reader import topic_log  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402


def confirmations(servers: str, topics: int, prefix: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(f"{prefix}{i}__logstore_commits", 1, 3) for i in range(topics)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers, transactional_id=f"bench-{prefix}",
                             enable_idempotence=True)
    producer.init_transactions()
    for snapshot in (1, 2, 3):  # each a transaction, as a run's confirmation is
        producer.begin_transaction()
        for i in range(topics):
            producer.send(f"{prefix}{i}__logstore_commits", key=b"t", partition=0,
                          value=json.dumps({"snapshot": snapshot, "end_offsets": {"0": snapshot}}).encode())
        producer.commit_transaction()
    producer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=8)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args(argv)
    with KafkaCluster(Path(tempfile.mkdtemp(prefix="bench-run-records-")), nodes=3) as cluster:
        servers, prefix = cluster.bootstrap_servers, f"m{uuid.uuid4().hex[:6]}_"
        logs = [topic_log(servers, f"{prefix}{i}") for i in range(args.topics)]
        models = tuple(ModelAtRun(f"model.p.m{i}", f"m{i}", "changed", topic=f"m{i}", snapshot=3,
                                  end_offsets={0: 100}) for i in range(12))
        writes = []
        for i in range(args.writes):
            record = RunRecord(f"inv-{i}-{uuid.uuid4().hex}", "bench", "s", "run", {}, "t0", "t1", models)
            started = time.monotonic()
            run_record.write_run_record(record, logs[:1], open_model_log)
            writes.append(time.monotonic() - started)
        print(f"writing a run record: first {writes[0]:.2f} s (creates the topic), then median "
              f"{statistics.median(writes[1:]):.3f} s ({min(writes[1:]):.3f}-{max(writes[1:]):.3f})")
        confirmations(servers, args.topics, prefix)
        for _ in range(args.tries):
            started = time.monotonic()
            found = run_record.latest_confirmations(logs, open_model_log)
            together = time.monotonic() - started
            assert all(v is not None and v["snapshot"] == 3 for v in found.values())
            started = time.monotonic()
            for log in logs[:20]:  # a sample: each takes as long as the next
                open_model_log(log).open_reader().control_records()
            each = (time.monotonic() - started) / 20
            print(f"{args.topics} control topics: one consumer for all {together:.2f} s; one "
                  f"consumer each {each:.3f} s a topic, {each * args.topics:.1f} s for {args.topics}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
