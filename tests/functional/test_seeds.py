"""Logged seeds: `dbt seed` logs the difference from the seed's previous contents, as a `table`
model's rebuild does (keyed with the seed's `unique_key`, keyless otherwise), `--full-refresh`
too, and a change of columns writes every row again with the new image. After every run: the
independent replay, `status --verify` and Flink's `debezium-json` agree with the table."""
from collections import Counter
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import changes, confirmed, read_topic, replay, table_state, new_messages
from tests.functional.dbt_helpers import logstore_statuses
from tests.functional.flink_peer import (
    apply_changelog, canonical_rows, debezium_case, decoded, differences,
)

CSV = {
    1: "id,name,amount\n1,Ada,10.5\n2,Bo,20.0\n3,Cy,30.25\n",
    2: "id,name,amount\n1,Ada,10.5\n2,Bo B,21.0\n4,Di,40.0\n",  # update 2, delete 3, insert 4
    3: "id,name,amount,tier\n1,Ada,10.5,gold\n2,Bo B,21.0,\n4,Di,40.0,silver\n",  # a new column
}


def _seed(project, step, *args):
    for name in ("customers", "prices"):
        (Path(project.project_root) / "seeds" / f"{name}.csv").write_text(CSV[step])
    return {r.node.name: r.adapter_response for r in run_dbt(["seed", *args])}



class TestLoggedSeeds:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"customers.csv": CSV[1], "prices.csv": CSV[1]}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"seeds": {"+log_system": "kafka"}}

    @pytest.fixture(scope="class")
    def models(self):  # the seeds' properties: customers keyed, prices keyless
        return {"seeds.yml": "seeds:\n  - name: customers\n    config:\n      unique_key: id\n"}

    def _check(self, project, servers, tmp_path, flink_decoder):
        logs, cases, tables = {}, [], {}
        tmp_path.mkdir(parents=True, exist_ok=True)
        for seed in ("customers", "prices"):
            topic = relation = f"{project.test_schema}.{seed}"
            logs[seed] = confirmed(servers, topic, read_topic(servers, topic))
            types, table = tables[seed] = table_state(relation)
            assert replay(logs[seed], types) == table, seed
            cases.append(debezium_case(seed, logs[seed], types, tmp_path))
        statuses = logstore_statuses(project)
        assert all(statuses[s].agree for s in logs), {s: statuses[s].problems for s in logs}
        results = flink_decoder.decode(cases)
        for case in cases:
            types, table = tables[case.name]
            flink = apply_changelog(canonical_rows(decoded(results, case), types))
            assert flink == table, differences(flink_decoder, table)
        return logs

    def test_dbt_seed_logs_what_the_csv_changed(self, project, kafka_bootstrap_servers, tmp_path, flink_decoder):
        servers = kafka_bootstrap_servers
        responses = _seed(project, 1)
        assert responses["customers"]["rows_mirrored"] == 3
        log1 = self._check(project, servers, tmp_path / "1", flink_decoder)

        _seed(project, 2)
        log2 = self._check(project, servers, tmp_path / "2", flink_decoder)
        keyed = {m.key.decode(): m.op for m in changes(new_messages(log2["customers"], log1["customers"]))}
        assert keyed == {'{"id":2}': "u", '{"id":3}': "d", '{"id":4}': "c"}
        keyless = Counter(m.op for m in new_messages(log2["prices"], log1["prices"]))
        assert keyless == Counter(d=2, c=2)  # the old and new image of row 2, row 3 out, row 4 in

        responses = _seed(project, 2, "--full-refresh")  # same CSV: nothing to log
        assert responses["customers"]["rows_mirrored"] == responses["prices"]["rows_mirrored"] == 0

        _seed(project, 3)  # a new column: every row again, with the new image
        log3 = self._check(project, servers, tmp_path / "3", flink_decoder)
        assert Counter(m.op for m in changes(new_messages(log3["customers"], log2["customers"]))) == Counter(u=3)
