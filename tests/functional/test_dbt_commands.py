"""dbt's other commands and configs on a logged model: each logs correctly or refuses before
anything changes (docs/operations.md, "What each dbt command does to the log").

- `contract: {enforced: true}`: a model whose SQL keeps its contract logs as usual; one that
  breaks it fails before its table or topic changes;
- `dbt show`: runs the model's query, changes nothing and logs nothing;
- `dbt clone` where it would replace the table: refused (the macro: tests/unit/test_macros.py).
"""
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract, end_offsets, table_state
from tests.functional.dbt_helpers import failure_text

CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select * from values (1, 'Ada'), (2, 'Bo'){{ var('more', '') }} as t(id, name)
"""
CONTRACT = """
models:
  - name: customers
    config:
      contract: {enforced: true}
    columns:
      - name: id
        data_type: int
      - name: name
        data_type: string
"""



class TestContractsAndShow:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "schema.yml": CONTRACT}

    def test_contracts_and_show(self, project, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        topic = relation = f"{project.test_schema}.customers"
        run_dbt(["run"])
        assert_contract(servers, topic, relation)
        topics = [topic, topic + "__logstore_commits"]
        offsets, table = end_offsets(servers, topics), table_state(relation)

        # dbt show runs the query and nothing else
        run_dbt(["show", "--select", "customers", "--vars", "{more: ', (3, \"Cy\")'}"])
        assert end_offsets(servers, topics) == offsets and table_state(relation) == table

        # the SQL breaks the contract (a third column): refused before the table or topic changes
        models = Path(project.project_root) / "models"
        (models / "customers.sql").write_text(CUSTOMERS.replace("select *", "select *, 1 as extra"))
        text = failure_text(["run"])
        assert "extra" in text and "contract" in text.lower(), text[-2000:]
        assert end_offsets(servers, topics) == offsets and table_state(relation) == table

        # kept, it logs as usual
        (models / "customers.sql").write_text(CUSTOMERS)
        (result,) = run_dbt(["run", "--vars", "{more: ', (3, \"Cy\")'}"])
        assert result.adapter_response["rows_mirrored"] == 1
        assert_contract(servers, topic, relation)
