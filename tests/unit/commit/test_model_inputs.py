"""A model's inputs (commit/model_inputs.py): the logged models among its upstreams, and what
its confirmation says of each: the snapshot read the same before and after the build, else not
known, never guessed (a commit under way, a commit not logged yet, a change in between)."""
from types import SimpleNamespace

from dbt.adapters.logstore.commit import model_inputs
from dbt.adapters.logstore.commit.table_snapshot import input_snapshot
from dbt.adapters.logstore.log.control_records import Confirmation, ModelInput
from dbt.adapters.logstore.names import COMMITTED, INTENT, MIRRORED, SNAPSHOT_ID

NODES = {
    "model.p.customers": {"name": "customers", "alias": "customers", "schema": "s", "resource_type": "model", "logged": True},
    "model.p.orders": {"name": "orders", "alias": "orders_v2", "schema": "s", "resource_type": "model", "logged": True},
    "model.p.plain": {"name": "plain", "schema": "s", "resource_type": "model", "logged": False},
}


def log_of(node):
    return SimpleNamespace(enabled=node["logged"], topic=f"t.{node['name']}")


class Catalog:
    def __init__(self, props):
        self.props, self.read = props, []

    def properties(self, relation):
        self.read.append(relation)
        if relation not in self.props:
            raise RuntimeError("Table or view not found")
        return self.props[relation]


def logged(snapshot, committed="a", mirrored="a", intent=None):
    props = {SNAPSHOT_ID: str(snapshot), COMMITTED: committed, MIRRORED: mirrored}
    return {**props, INTENT: intent} if intent else props


def test_only_logged_models_are_inputs_read_by_their_own_relation():
    found = model_inputs.logged_inputs(
        ["model.p.plain", "model.p.orders", "source.p.raw.x", "model.p.customers"], NODES, log_of)
    assert [(t.name, t.topic, t.relation) for t in found] == [
        ("customers", "t.customers", "s.customers"), ("orders", "t.orders", "s.orders_v2")]


def test_the_snapshot_a_table_holds_or_not_known():
    assert input_snapshot(logged(7)) == 7
    assert input_snapshot(logged(7, intent="a")) == 7  # its last statement commit, done
    assert input_snapshot(logged(7, intent="b")) is None  # a statement commit under way
    assert input_snapshot(logged(7, committed="b")) is None  # committed, not logged yet
    assert input_snapshot(None) is None  # missing


def test_an_input_read_the_same_before_and_after_is_named_else_not_known():
    catalog = Catalog({"s.customers": logged(12), "s.orders_v2": logged(9)})
    read = model_inputs.read_at_start(catalog, ["model.p.customers", "model.p.orders"], NODES, log_of)
    catalog.props["s.orders_v2"] = logged(10)  # orders changed while the build read it
    assert read.settle(catalog) == (ModelInput("customers", "t.customers", 12),
                                    ModelInput("orders", "t.orders", None, (9, 10)))
    assert catalog.read == ["s.customers", "s.orders_v2"] * 2  # two statements an input
    assert model_inputs.read_at_start(catalog, None, NODES, log_of) is None  # not a build
    none = model_inputs.read_at_start(catalog, ["model.p.plain"], NODES, log_of)
    assert none.settle(catalog) == ()  # no logged input: read nothing more


def test_inputs_in_a_confirmation_read_back():
    value = {"table": "s.gold", "snapshot": 7, "attempt": "x", "offsets": {}, "inputs": [
        ModelInput("customers", "t.customers", 12).to_json(),
        ModelInput("orders", "t.orders", None, (9, 10)).to_json()]}
    assert Confirmation.from_json(value).inputs == (ModelInput("customers", "t.customers", 12),
                                                    ModelInput("orders", "t.orders", None, (9, 10)))
    assert Confirmation.from_json({**value, "inputs": None}).inputs is None


def test_an_input_read_through_logstore_changes_is_the_snapshot_read_up_to():
    # the build read customers' log up to snapshot 12, though its table is at 14 meanwhile
    catalog = Catalog({"s.customers": logged(14), "s.orders_v2": logged(9)})
    read = model_inputs.read_at_start(catalog, ["model.p.customers", "model.p.orders"], NODES,
                                      log_of, read_up_to={"customers": 12})
    assert read.settle(catalog) == (ModelInput("customers", "t.customers", 12),
                                    ModelInput("orders", "t.orders", 9))
    assert catalog.read == ["s.orders_v2"] * 2  # no statement for the input read exactly


SOURCES = {
    "source.p.crm.accounts": {"source_name": "crm", "name": "accounts", "identifier": "accounts_v1", "schema": "other"},
    "source.p.raw.events": {"source_name": "raw", "name": "events", "schema": "raw"},
}


def test_a_source_is_an_input_when_its_table_is_logged_and_an_unlogged_one_is_read_once():
    accounts = {**logged(5), "logstore.log.topic": "other.accounts"}
    catalog = Catalog({"other.accounts_v1": accounts, "raw.events": {"owner": "x"},
                       "s.customers": logged(12)})
    depends_on = ["source.p.crm.accounts", "source.p.raw.events", "model.p.customers"]
    not_logged = set()
    read = model_inputs.read_at_start(catalog, depends_on, NODES, log_of, sources=SOURCES,
                                      not_logged=not_logged)
    assert read.settle(catalog) == (ModelInput("crm.accounts", "other.accounts", 5),
                                    ModelInput("customers", "t.customers", 12))
    assert not_logged == {"raw.events"}
    catalog.read.clear()
    model_inputs.read_at_start(catalog, depends_on, NODES, log_of, sources=SOURCES, not_logged=not_logged)
    assert "raw.events" not in catalog.read  # known not logged for the rest of the invocation
    # a source logged before its table named its topic: the topic is not known
    del accounts["logstore.log.topic"]
    read = model_inputs.read_at_start(catalog, ["source.p.crm.accounts"], NODES, log_of, sources=SOURCES)
    assert read.settle(catalog) == (ModelInput("crm.accounts", None, 5),)
    assert ModelInput("crm.accounts", None, 5).to_json()["topic"] is None


def test_what_another_models_logstore_changes_left_is_not_this_models():
    from dbt.adapters.logstore.commit.model_run import ModelRunState

    state = ModelRunState()
    state.read_changes("gold")["customers"] = 7
    state.sources = '{"s.customers":{}}'
    assert state.of_model("gold").read_up_to == {"customers": 7}  # its own: kept
    # gold's compile failed after its logstore_changes(); silver runs next on the thread
    state.of_model("silver")
    assert (state.read_up_to, state.sources, state.changes_of) == ({}, None, None)
