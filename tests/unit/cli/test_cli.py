"""The CLI: argument parsing and commands that need no running broker."""
import argparse
import json
import os
import socket

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.cli import commands as cli, reading_commands
from dbt.adapters.logstore.reading import reader
from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.cli.broker import DEFAULT_HOST, DEFAULT_PORT, Listener, free_port, listener
from dbt.adapters.logstore.cli.commands import build_parser, main
from dbt.adapters.logstore.config.address import CLI_SERVERS, servers_setting
from dbt.adapters.logstore.reading.replay import ChangeRecord


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
    assert args.func is reading_commands.tail


def test_parse_tail_options(tmp_path):
    args = build_parser().parse_args(["tail", "t", "--bootstrap-servers", "h:1, h:2",
                                      "--idle-seconds", "0.25", "--from", "snapshot:3", "-f",
                                      "--normalize", "--project-dir", str(tmp_path),
                                      "--target", "prod"])
    assert args.json is False
    assert args.bootstrap_servers == "h:1,h:2"
    assert args.idle_seconds == 0.25
    assert args.start == "snapshot:3" and args.follow and args.normalize
    assert args.project_dir == str(tmp_path) and args.target == "prod"


def test_parse_status(tmp_path):
    args = build_parser().parse_args(["status", "--verify", "--project-dir", str(tmp_path)])
    assert args.func is reading_commands.status and args.verify and args.project_dir == str(tmp_path)


# the arguments' checks (argparse types): before anything connects

@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9092", "127.0.0.1:9092"),
    ("kafka1:9092,kafka2:9093", "kafka1:9092,kafka2:9093"),
    (" h:1 , h:2 ,", "h:1,h:2"),
    ("[::1]:9092", "[::1]:9092"),
    ("broker-1.example.com:65535", "broker-1.example.com:65535"),
])
def test_bootstrap_servers(text, expected):
    assert cli.bootstrap_servers(text) == expected


@pytest.mark.parametrize("text, says", [
    ("", "'' is empty: give host:port[,host:port], e.g. 127.0.0.1:9092"),
    (" , ", "is empty"),
    ("127.0.0.1:notaport", "'127.0.0.1:notaport': the port 'notaport' is not a number from 1 to 65535"),
    ("h:0", "the port '0' is not a number from 1 to 65535"),
    ("h:70000", "the port '70000' is not a number from 1 to 65535"),
    ("h:", "the port '' is not a number"),
    ("kafka://h:9092", "has a scheme ('kafka://'): give host:port without it, e.g. h:9092"),
    ("PLAINTEXT://h:9092", "has a scheme ('PLAINTEXT://')"),
    ("localhost", "'localhost' has no port"),
    ("h:1,h2", "'h2' has no port"),
    (":9092", "':9092' has no host"),
    ("h:1:2", "the port '1:2' is not a number"),
    ("my host:9092", "is not host:port"),
])
def test_bad_bootstrap_servers(text, says):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        cli.bootstrap_servers(text)
    assert says in str(info.value)


@pytest.mark.parametrize("text, expected", [("1", 1), ("9092", 9092), ("65535", 65535)])
def test_port(text, expected):
    assert cli.port(text) == expected


@pytest.mark.parametrize("text", ["0", "65536", "-1", "abc", "", "9092.0"])
def test_bad_port(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a port: give a number from 1 to 65535"):
        cli.port(text)


@pytest.mark.parametrize("text, expected", [("0", 0.0), ("0.25", 0.25), ("5", 5.0), ("1e1", 10.0)])
def test_seconds(text, expected):
    assert cli.seconds(text) == expected


@pytest.mark.parametrize("text, what", [("-5", "is negative"), ("-0.1", "is negative"),
                                        ("soon", "is not a number of seconds"),
                                        ("nan", "is not a number of seconds"),
                                        ("inf", "is not a number of seconds")])
def test_bad_seconds(text, what):
    with pytest.raises(argparse.ArgumentTypeError, match=f"'{text}' {what}: give a number of seconds, 0 or more"):
        cli.seconds(text)


def test_host():
    assert cli.host(" localhost ") == "localhost"
    for bad in ("", " ", "tcp://h", "a b"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a host"):
            cli.host(bad)


def test_directories(tmp_path):
    assert cli.project_dir(str(tmp_path)) == str(tmp_path)
    assert cli.profiles_dir(str(tmp_path)) == str(tmp_path)
    with pytest.raises(argparse.ArgumentTypeError, match="does not exist: give the directory of a dbt project"):
        cli.project_dir(str(tmp_path / "nosuch"))
    (tmp_path / "file").write_text("")
    with pytest.raises(argparse.ArgumentTypeError, match="is not a directory"):
        cli.project_dir(str(tmp_path / "file"))
    with pytest.raises(argparse.ArgumentTypeError, match="does not exist: give the directory holding profiles.yml"):
        cli.profiles_dir(str(tmp_path / "nosuch"))


@pytest.mark.parametrize("argv, line", [
    (["tail", "t", "--bootstrap-servers", "127.0.0.1:notaport"],
     "error: --bootstrap-servers '127.0.0.1:notaport': the port 'notaport' is not a number from 1 "
     "to 65535; see 'dbt-logstore tail --help'."),
    (["tail", "t", "--idle-seconds", "-5"],
     "error: --idle-seconds '-5' is negative: give a number of seconds, 0 or more (e.g. 0.5); see "
     "'dbt-logstore tail --help'."),
    (["broker", "start", "--port", "abc"],
     "error: --port 'abc' is not a port: give a number from 1 to 65535; see 'dbt-logstore broker --help'."),
    (["broker", "restart"],
     "error: action: invalid choice: 'restart' (choose from 'start', 'stop', 'status'): did you "
     "mean start?"),
    (["broker", "frobnicate"],
     "error: action: invalid choice: 'frobnicate' (choose from 'start', 'stop', 'status'); see "
     "'dbt-logstore broker --help'."),
    (["tail"], "error: the following arguments are required: MODEL|TOPIC; see 'dbt-logstore tail --help'."),
    (["status", "--project-dir", "/no/such/dir"],
     "error: --project-dir '/no/such/dir' does not exist: give the directory of a dbt project (the "
     "one holding dbt_project.yml); see 'dbt-logstore status --help'."),
])
def test_bad_arguments_are_one_line_and_exit_code_2(argv, line, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [line]


@pytest.mark.parametrize("argv, line", [
    (["--versoin"], "error: unrecognized argument '--versoin': did you mean --version?"),
    (["--version=x", "--debgu"], "error: unrecognized argument '--debgu': did you mean --debug?"),
    (["tial", "orders"], "error: unrecognized command 'tial': did you mean tail?"),
    (["staus"], "error: unrecognized command 'staus': did you mean status?"),
    (["tail", "orders", "--follwo"], "error: unrecognized argument '--follwo': did you mean --follow?"),
    (["--debug", "status", "--verfy"], "error: unrecognized argument '--verfy': did you mean --verify?"),
    (["broker", "start", "--prot=9092"], "error: unrecognized argument '--prot': did you mean --port?"),
    (["--frobnicate"], "error: unrecognized argument '--frobnicate'; see 'dbt-logstore --help'."),
    (["frobnicate"], "error: unrecognized command 'frobnicate': choose from broker, tail, status; "
                     "see 'dbt-logstore --help'."),
    (["tail", "orders", "--zzz"], "error: unrecognized argument '--zzz'; see 'dbt-logstore tail --help'."),
])
def test_a_typo_is_named_with_the_nearest_valid_name(argv, line, capsys):
    """Not "the following arguments are required: COMMAND": the mistyped word, and what was
    meant; one line on stderr, exit code 2."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [line]


@pytest.mark.parametrize("argv", [["tail", "orders", "--fol"], ["tail", "orders", "-f"],
                                  ["tail", "orders", "--idle-seconds=0"],
                                  ["tail", "orders", "--from=latest"], ["--debug", "status"]])
def test_abbreviations_and_values_are_not_typos(argv):
    args = build_parser().parse_args(argv)
    assert args.command in ("tail", "status")


@pytest.mark.parametrize("argv", [["--help"], ["broker", "--help"], ["tail", "--help"],
                                  ["status", "--help"]])
def test_help_has_no_markdown_backticks(argv, capsys):
    """Help is read in a terminal: no Markdown's `code` marks in any help, description or epilog."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and "`" not in out
    for parser in _parsers(build_parser()):
        texts = [parser.description, parser.epilog] + [a.help for a in parser._actions]
        assert not [t for t in texts if t and "`" in t], parser.prog


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"dbt-logstore {version}\n"


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_argument_has_help():
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{parser.prog} {action.dest} has no help"


@pytest.mark.parametrize("argv", [["--help"], ["broker", "--help"], ["tail", "--help"],
                                  ["status", "--help"]])
def test_help_names_the_exit_codes(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert "exit codes:" in capsys.readouterr().out


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
    out = capsys.readouterr().out
    assert "not running" in out
    assert f"another process listens on port {port} (pid {os.getpid()}" in out


def test_broker_stop_when_not_running(tmp_path, capsys):
    port = free_port()
    code = main(["broker", "stop", "--port", str(port), "--state-dir", str(tmp_path)])
    assert code == 0
    assert "was not running" in capsys.readouterr().out


def test_listener_is_found_through_proc():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        found = listener(port)
    assert found is not None and found.pid == os.getpid() and not found.is_broker
    assert listener(free_port()) is None


@pytest.fixture
def broker_elsewhere(monkeypatch, tmp_path):
    """An embedded broker on a port, started with another --state-dir than the command's."""
    other = tmp_path / "other"
    monkeypatch.setattr(cli, "listener", lambda port: Listener(4242, "tansu", other))
    monkeypatch.setattr("dbt.adapters.logstore.cli.broker.listener", lambda port: Listener(4242, "tansu", other))
    return other


def test_broker_stop_without_its_state_dir_names_it(tmp_path, capsys, broker_elsewhere):
    code = main(["broker", "stop", "--port", "9999", "--state-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: no pid file for port 9999 in {tmp_path}, but an embedded broker started with "
        f"--state-dir {broker_elsewhere} serves port 9999 (pid 4242): pass --state-dir "
        f"{broker_elsewhere}; nothing was stopped."]


def test_broker_status_without_its_state_dir_names_it(tmp_path, capsys, broker_elsewhere):
    code = main(["broker", "status", "--port", "9999", "--state-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("broker running at 127.0.0.1:9999 (pid 4242), without a pid file in ")
    assert f"pass --state-dir {broker_elsewhere}" in out


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

    def read_changelog(log, topic=None, start="earliest", follow=False, normalize=False,
                       idle_seconds=1.0, **kw):
        assert servers_setting(log) == CLI_SERVERS  # its errors name the option
        calls.append((log.bootstrap_servers, log.topic, str(start), follow, normalize, idle_seconds))
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
    assert main(["tail", "t", "--bootstrap-servers", f"{DEFAULT_HOST}:{DEFAULT_PORT}"]) == 0
    assert fake_changelog[0][:2] == (f"{DEFAULT_HOST}:{DEFAULT_PORT}", "t")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["snap", "part", "offset", "op", "key", "/", "before", "->", "after"]
    assert lines[1].split() == ["1", "0", "0", "c", '{"id":', "1}", "-", "->", '{"id":', "1,",
                                '"name":', '"é"}']
    assert lines[2].split()[:5] == ["2", "1", "4", "d", "-"]
    assert lines[2].endswith('{"x": 2} -> -')


def test_tail_marks_a_generations_start(fake_changelog, capsys, monkeypatch):
    from dbt.adapters.logstore.reading.replay import generation_starts

    marked = [generation_starts(5, 2), ChangeRecord(0, 9, {"id": 1}, "r", None, {"id": 1}, 12, 5, 2)]
    monkeypatch.setattr(reader, "read_changelog", lambda *a, **k: iter(marked))
    assert main(["tail", "t", "--bootstrap-servers", f"{DEFAULT_HOST}:{DEFAULT_PORT}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["5", "-1", "-1", "g"]
    assert lines[1].endswith("generation 2 starts: rows changed before it are superseded")
    assert lines[2].split()[:4] == ["5", "0", "9", "r"]  # a snapshot read, as on the wire


@pytest.mark.parametrize("start", ["snapshot", "snapshot:x", "yesterday", "timestamp:soon"])
def test_tail_bad_start_point_is_a_clear_error(fake_changelog, capsys, start):
    assert main(["tail", "t", "--from", start]) == 2
    err = capsys.readouterr().err
    assert "earliest, latest, snapshot:N, timestamp:T, latest-full" in err or "ISO-8601" in err


def test_tail_outside_a_project_without_bootstrap_servers_is_a_usage_error(fake_changelog, capsys, tmp_path):
    """No dbt project, and no --bootstrap-servers: said at once, nothing read (it was once read
    as a topic on 127.0.0.1:9092, and blamed Kafka 12 s later)."""
    assert main(["tail", "customers"]) == 2
    out, err = capsys.readouterr()
    assert fake_changelog == [] and out == ""  # not even the header
    assert err.splitlines() == [
        f"error: No dbt project at {tmp_path.resolve()} (no dbt_project.yml) to find the model "
        f"'customers' in: run the command in the project's directory or pass --project-dir, or "
        f"read a topic of that name with --bootstrap-servers HOST:PORT (e.g. 127.0.0.1:9092)."]


def test_tail_latest_full_of_a_topic_needs_a_model(fake_changelog, capsys):
    assert main(["tail", "t", "--from", "latest-full", "--bootstrap-servers", "h:9"]) == 2
    assert "name a model" in capsys.readouterr().err


def test_status_outside_a_project_is_a_clear_error(tmp_path, capsys):
    assert main(["status", "--project-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "No dbt project" in err and "--project-dir" in err
    assert "--bootstrap-servers" not in err  # status has no such option


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
        def __init__(self, project_dir, profiles_dir, target, vars, engine_log=None):
            seen["vars"] = vars
            raise reader.UsageError("stop here")

    monkeypatch.setattr("dbt.adapters.logstore.reading.project.DbtProject", Project)
    assert main(["status", "--project-dir", str(tmp_path), "--vars", "{run: r1}"]) == 2
    assert seen["vars"] == {"run": "r1"}


# failures: one line on stderr, exit code 2 for usage errors and 1 for the rest

def _failing(monkeypatch, exc):
    def tail(args):
        print("a record", flush=True)
        raise exc

    monkeypatch.setattr(reading_commands, "tail", tail)


@pytest.mark.parametrize("exc, code, line", [
    (reader.UsageError("Start point 'x' is not known."), 2, "error: Start point 'x' is not known."),
    (reader.ReaderError("Model 'm': Kafka at 'h:1': unreachable:\n  no broker answered."), 1,
     "error: Model 'm': Kafka at 'h:1': unreachable: no broker answered."),
    (RuntimeError("boom\nagain"), 1, "error: boom again (unexpected; run with --debug for the traceback)"),
    # dbt's errors: their own words, no class name; a read-only command changed nothing
    (DbtRuntimeError("Model 'customers': Kafka at 'h:1': unreachable. Nothing was changed."), 1,
     "error: Model 'customers': Kafka at 'h:1': unreachable."),
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
    monkeypatch.setattr(reading_commands, "project_of", lambda args: _Project())
    assert main(["tail", name, "--json"]) == 2
    assert capsys.readouterr().err.splitlines() == [line]


@pytest.mark.parametrize("command", ["broker", "tail", "status"])
def test_help_ends_with_two_examples(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-3] == "examples:"
    assert all(line.startswith(f"  dbt-logstore {command} ") for line in lines[-2:])


def test_a_topic_is_called_a_topic(monkeypatch, capsys):
    _failing(monkeypatch, reader.ReaderError("Model 'shop.orders': Kafka at 'h:1': unreachable."))
    assert main(["tail", "shop.orders", "--bootstrap-servers", "h:1"]) == 1
    assert capsys.readouterr().err == "error: Topic 'shop.orders': Kafka at 'h:1': unreachable.\n"


def test_ctrl_c_prints_interrupted_and_exits_130(monkeypatch, capsys):
    _failing(monkeypatch, KeyboardInterrupt())
    assert main(["tail", "t"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_a_failure_after_ctrl_c_is_the_interrupt(monkeypatch, capsys):
    """The JVM dies of the same Ctrl-C: the read fails with py4j's error, not the interrupt."""
    from dbt.adapters.logstore.cli import endings as cli_endings

    monkeypatch.setattr(cli_endings.Interrupts, "seen", True)
    _failing(monkeypatch, RuntimeError("Py4JError: An error occurred while calling o42.sql"))
    assert main(["tail", "t"]) == 130
    assert capsys.readouterr().err == "interrupted\n"
