"""The Apache Kafka cluster the suite starts (tests/kafka_cluster.py): its server properties."""
from tests.kafka_cluster import ADMIN, KafkaCluster, main


def test_three_nodes_replicate_every_topic_three_times_and_need_two_in_sync(tmp_path):
    cluster = KafkaCluster(tmp_path, nodes=3)
    nodes = [cluster.node(i) for i in (1, 2, 3)]
    props = [cluster._properties(n) for n in nodes]
    voters = {p["controller.quorum.voters"] for p in props}
    assert len(voters) == 1 and voters.pop().count("@127.0.0.1:") == 3  # one quorum of three
    for node, p in zip(nodes, props):
        assert p["process.roles"] == "broker,controller" and p["node.id"] == str(node.id)
        assert p["listeners"].startswith(f"PLAINTEXT://127.0.0.1:{node.port},")
        assert p["default.replication.factor"] == p["transaction.state.log.replication.factor"] == "3"
        assert p["min.insync.replicas"] == p["transaction.state.log.min.isr"] == "2"
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{n.port}" for n in nodes)
    assert len({n.port for n in nodes} | {n.controller_port for n in nodes}) == 6


def test_one_node_with_scram_users_and_acls(tmp_path):
    cluster = KafkaCluster(tmp_path, nodes=1, sasl_users={"alice": "a"},
                           config={"auto.create.topics.enable": "false"})
    p = cluster._properties(cluster.node(1))
    assert p["default.replication.factor"] == "1" and p["min.insync.replicas"] == "1"
    assert p["listeners"].startswith("SASL_PLAINTEXT://")
    assert p["authorizer.class.name"].endswith("StandardAuthorizer")
    assert f"User:{ADMIN[0]}" in p["super.users"] and "alice" not in p["super.users"]
    assert p["auto.create.topics.enable"] == "false"
    assert cluster.client_properties("alice", "a")["sasl.plain.username"] == "alice"
    assert cluster.admin_client_config()["sasl_plain_username"] == ADMIN[0]


def test_the_runner_wants_a_command(capsys):
    assert main(["run"]) == 2 and "usage" in capsys.readouterr().err
