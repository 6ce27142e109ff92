"""The CLI: argument parsing and commands that need no running broker."""
import json
import socket

import pytest

from dbt.adapters.logstore import cli, reader
from dbt.adapters.logstore.broker import DEFAULT_HOST, DEFAULT_PORT, free_port
from dbt.adapters.logstore.cli import build_parser, main
from dbt.adapters.logstore.replay import ChangeRecord


def test_parse_broker_start():
    args = build_parser().parse_args(["broker", "start", "--port", "1234", "--state-dir", "X"])
    assert args.command == "broker"
    assert args.action == "start"
    assert args.port == 1234 and isinstance(args.port, int)
    assert args.state_dir == "X"
    assert args.host == DEFAULT_HOST
    assert args.func is cli._broker


def test_parse_broker_defaults():
    args = build_parser().parse_args(["broker", "status"])
    assert args.port == DEFAULT_PORT
    assert args.action == "status"


def test_parse_tail_json():
    args = build_parser().parse_args(["tail", "analytics.orders", "--json"])
    assert args.command == "tail"
    assert args.name == "analytics.orders"
    assert args.json is True
    assert args.bootstrap_servers is None  # a model of the project in ., or the local broker
    assert args.start == "earliest" and not args.follow and not args.normalize
    assert args.idle_seconds == 1.0
    assert args.project_dir == "." and args.profiles_dir is None
    assert args.func is cli._tail


def test_parse_tail_options():
    args = build_parser().parse_args(["tail", "t", "--bootstrap-servers", "h:1,h:2",
                                      "--idle-seconds", "0.25", "--from", "snapshot:3", "-f",
                                      "--normalize", "--project-dir", "p", "--target", "prod"])
    assert args.json is False
    assert args.bootstrap_servers == "h:1,h:2"
    assert args.idle_seconds == 0.25
    assert args.start == "snapshot:3" and args.follow and args.normalize
    assert args.project_dir == "p" and args.target == "prod"


def test_parse_status():
    args = build_parser().parse_args(["status", "--verify", "--project-dir", "p"])
    assert args.func is cli._status and args.verify and args.project_dir == "p"


@pytest.mark.parametrize("argv", [[], ["broker"], ["broker", "restart"],
                                  ["broker", "start", "--port", "abc"], ["tail"]])
def test_parse_errors(argv, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2


def test_broker_status_not_running(tmp_path, capsys):
    port = free_port()
    code = main(["broker", "status", "--port", str(port), "--state-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "not running" in out
    assert f"127.0.0.1:{port}" in out


def test_broker_status_port_in_use_without_pid_file_is_not_running(tmp_path, capsys):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = main(["broker", "status", "--port", str(port), "--state-dir", str(tmp_path)])
    assert code == 1
    assert "not running" in capsys.readouterr().out


def test_broker_stop_when_not_running(tmp_path, capsys):
    port = free_port()
    code = main(["broker", "stop", "--port", str(port), "--state-dir", str(tmp_path)])
    assert code == 0
    assert "was not running" in capsys.readouterr().out


def test_broker_start_on_busy_port_reports_error(tmp_path, capsys):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = main(["broker", "start", "--port", str(port), "--state-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "already in use" in captured.err
    assert not (tmp_path / f"broker-{port}.pid").exists()


RECORDS = [
    ChangeRecord(0, 0, {"id": 1}, "c", None, {"id": 1, "name": "é"}, 10, 1),
    ChangeRecord(1, 4, None, "d", {"x": 2}, None, 11, 2),
]


@pytest.fixture
def fake_changelog(monkeypatch, tmp_path):
    calls = []

    def read_changelog(bootstrap_servers, topic, start="earliest", follow=False, normalize=False,
                       idle_seconds=1.0, **kw):
        calls.append((bootstrap_servers, topic, str(start), follow, normalize, idle_seconds))
        return iter(RECORDS)

    monkeypatch.setattr(reader, "read_changelog", read_changelog)
    monkeypatch.chdir(tmp_path)  # no dbt project here: NAME is a topic
    return calls


def test_tail_json(fake_changelog, capsys):
    code = main(["tail", "analytics.orders", "--json", "--bootstrap-servers", "h:9",
                 "--idle-seconds", "0.5", "--from", "snapshot:2", "--normalize"])
    assert code == 0
    assert fake_changelog == [("h:9", "analytics.orders", "snapshot:2", False, True, 0.5)]
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"snapshot": 1, "partition": 0, "offset": 0, "key": {"id": 1}, "op": "c", "before": None,
         "after": {"id": 1, "name": "é"}},
        {"snapshot": 2, "partition": 1, "offset": 4, "key": None, "op": "d", "before": {"x": 2},
         "after": None},
    ]
    assert "é" in lines[0]  # not ASCII-escaped


def test_tail_table(fake_changelog, capsys):
    assert main(["tail", "t"]) == 0
    assert fake_changelog[0][0] == f"{DEFAULT_HOST}:{DEFAULT_PORT}"  # no project: local broker
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["snap", "part", "offset", "op", "key", "/", "before", "->", "after"]
    assert lines[1].split() == ["1", "0", "0", "c", '{"id":', "1}", "-", "->", '{"id":', "1,",
                                '"name":', '"é"}']
    assert lines[2].split()[:5] == ["2", "1", "4", "d", "-"]
    assert lines[2].endswith('{"x": 2} -> -')


@pytest.mark.parametrize("start", ["snapshot", "snapshot:x", "yesterday", "timestamp:soon"])
def test_tail_bad_start_point_is_a_clear_error(fake_changelog, capsys, start):
    assert main(["tail", "t", "--from", start]) == 2
    err = capsys.readouterr().err
    assert "earliest, latest, snapshot:N, timestamp:T, latest-full" in err or "ISO-8601" in err


def test_tail_latest_full_of_a_topic_needs_a_model(fake_changelog, capsys):
    assert main(["tail", "t", "--from", "latest-full", "--bootstrap-servers", "h:9"]) == 2
    assert "name a model" in capsys.readouterr().err


def test_status_outside_a_project_is_a_clear_error(tmp_path, capsys):
    assert main(["status", "--project-dir", str(tmp_path)]) == 2
    assert "No dbt project" in capsys.readouterr().err


# --vars, as dbt takes it (dbt's own parser)

@pytest.mark.parametrize("text, expected", [
    ("{run: r1}", {"run": "r1"}),
    ('{"run": "r1", "n": 2}', {"run": "r1", "n": 2}),
    ("run: r1\nlimit: {rows: 5}", {"run": "r1", "limit": {"rows": 5}}),
    (None, {}),
])
def test_parse_vars(text, expected, capsys):
    assert cli.parse_vars(text) == expected
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("text, what", [
    ("{run: r1", "is not valid YAML"), ("[1, 2]", "is a list"), ("r1", "is a str"), ("", "is empty"),
])
def test_bad_vars_are_a_usage_error(text, what, capsys):
    with pytest.raises(reader.UsageError, match=f"--vars '.*' {what}: give a YAML or JSON dictionary"):
        cli.parse_vars(text)
    assert capsys.readouterr() == ("", "")  # dbt's parser says nothing of its own


def test_bad_vars_end_the_command_in_one_line(tmp_path, capsys):
    assert main(["status", "--project-dir", str(tmp_path), "--vars", "{run: r1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["error: --vars '{run: r1' is not valid YAML: give a YAML or JSON "
                                "dictionary, as to dbt (--vars '{run: r1}' or --vars '{\"run\": \"r1\"}')."]


def test_vars_reach_the_project(monkeypatch, tmp_path):
    seen = {}

    class Project:
        def __init__(self, project_dir, profiles_dir, target, vars):
            seen["vars"] = vars
            raise reader.UsageError("stop here")

    monkeypatch.setattr("dbt.adapters.logstore.project.DbtProject", Project)
    assert main(["status", "--project-dir", str(tmp_path), "--vars", "{run: r1}"]) == 2
    assert seen["vars"] == {"run": "r1"}


# failures: one line on stderr, exit code 2 for usage errors and 1 for the rest

def _failing(monkeypatch, exc):
    def tail(args):
        print("a record", flush=True)
        raise exc

    monkeypatch.setattr(cli, "_tail", tail)


@pytest.mark.parametrize("exc, code, line", [
    (reader.UsageError("Start point 'x' is not known."), 2, "error: Start point 'x' is not known."),
    (reader.ReaderError("Model 'm': Kafka at 'h:1': unreachable:\n  no broker answered."), 1,
     "error: Model 'm': Kafka at 'h:1': unreachable: no broker answered."),
    (RuntimeError("boom\nagain"), 1, "error: RuntimeError: boom again (run with --debug for the traceback)"),
])
def test_failure_is_one_line_and_its_exit_code(monkeypatch, capsys, exc, code, line):
    _failing(monkeypatch, exc)
    assert main(["tail", "t"]) == code
    out, err = capsys.readouterr()
    assert out == "a record\n"
    assert err.splitlines() == [line]


@pytest.mark.parametrize("argv", [["--debug", "tail", "t"], ["tail", "t", "--debug"]])
def test_debug_shows_the_traceback_before_the_line(monkeypatch, capsys, argv):
    _failing(monkeypatch, reader.UsageError("Model 'x' is not logged"))
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):"
    assert err[-1] == "error: Model 'x' is not logged"


def test_debug_defaults_off():
    assert build_parser().parse_args(["status"]).debug is False
    assert build_parser().parse_args(["--debug", "status"]).debug is True


class _Project:
    project_dir = "/p"

    def model(self, name):
        return None

    def logged_models(self):
        return [type("M", (), {"name": "orders"})()]

    def has_loggable(self, name):
        return name == "plain"


@pytest.mark.parametrize("name, line", [
    ("nosuch", "error: 'nosuch' is not a model of the dbt project at /p (logged models: orders): "
               "check the name, or pass --bootstrap-servers to read a topic of that name."),
    ("plain", "error: Model 'plain' is not logged (logged models: orders): set log_system='kafka' "
              "in its config and run it, or name a logged model."),
])
def test_unknown_and_unlogged_models_are_usage_errors(monkeypatch, tmp_path, capsys, name, line):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_project", lambda args: _Project())
    assert main(["tail", name, "--json"]) == 2
    assert capsys.readouterr().err.splitlines() == [line]


@pytest.mark.parametrize("command", ["broker", "tail", "status"])
def test_help_ends_with_two_examples(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-3] == "examples:"
    assert all(line.startswith(f"  dbt-logstore {command} ") for line in lines[-2:])
