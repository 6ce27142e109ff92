"""A model run that failed with an error leaves nothing that only its next run would drop
(table_commit.drop_what_a_failed_run_staged, called from the adapter's post-model hook)."""
from types import SimpleNamespace
from typing import Dict, List

from dbt.adapters.logstore import names
from dbt.adapters.logstore.commit.table_commit import drop_what_a_failed_run_staged

TARGET = SimpleNamespace(database=None, schema="s", identifier="orders")


def relation_of(target, kind):
    suffix = names.CHANGES_SUFFIX if kind == "changes" else names.STAGED_SUFFIXES[kind]
    return SimpleNamespace(database=None, schema="s", identifier=f"{target.identifier}{suffix}")


class Catalog:
    def __init__(self, existing: Dict[str, Dict[str, str]]) -> None:
        self.existing, self.sql = existing, []  # identifier -> its properties

    def sibling(self, relation, identifier):
        return SimpleNamespace(identifier=identifier) if identifier in self.existing else None

    def rows(self, sql):  # SHOW TABLES ... LIKE '<model>__logstore_*' (leftovers.own_relations)
        assert sql == "show tables in s like 'orders__logstore_*'", sql
        return [("s", name, False) for name in self.existing if name.startswith("orders__logstore_")]

    def properties(self, relation):
        return self.existing.get(relation.identifier, {})

    def run(self, sql: str) -> None:
        self.sql.append(sql)

    def dropped(self) -> List[str]:
        return [s for s in self.sql if s.startswith("drop") and names.CHANGES_SUFFIX in s]


def _catalog(table_props, with_changes=True):
    existing = {"orders": table_props}
    if with_changes:
        existing[f"orders{names.CHANGES_SUFFIX}"] = {names.CHANGESET_ID: "run-2"}
    return Catalog(existing)


def test_staged_relations_go_and_a_change_set_never_committed_goes_too():
    catalog = _catalog({names.COMMITTED: "run-1", names.MIRRORED: "run-1"})
    catalog.existing.update({f"orders{suffix}": {} for suffix in names.STAGED_SUFFIXES.values()})
    drop_what_a_failed_run_staged(catalog, TARGET, relation_of)
    staged = [s for s in catalog.sql if any(x in s for x in names.STAGED_SUFFIXES.values())]
    assert len(staged) == len(names.STAGED_SUFFIXES)
    assert len(catalog.dropped()) == 1  # on_schema_change refused it before the table commit


def test_a_committed_change_set_stays_for_the_next_run_to_log():
    catalog = _catalog({names.COMMITTED: "run-2", names.MIRRORED: "run-1"})  # the broker was down
    drop_what_a_failed_run_staged(catalog, TARGET, relation_of)
    assert catalog.dropped() == []


def test_only_what_the_listing_finds_is_dropped():
    catalog = _catalog({names.COMMITTED: "run-1", names.MIRRORED: "run-1"}, with_changes=False)
    catalog.existing["orders__logstore_held"] = {}
    drop_what_a_failed_run_staged(catalog, TARGET, relation_of)
    assert len(catalog.sql) == 1 and "orders__logstore_held'" in catalog.sql[0]


def test_a_missing_table_is_left_to_recovery():
    catalog = Catalog({})  # a swap that failed between its drop and its rename
    drop_what_a_failed_run_staged(catalog, TARGET, relation_of)
    assert catalog.sql == []
