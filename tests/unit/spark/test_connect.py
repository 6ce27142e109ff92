"""The Spark Connect method's profile (issue 53): `method: connect` with `host: sc://host:port`
(Connect's ;token=...;use_ssl=true parameters, or the token and use_ssl fields), checked when a
connection opens in one sentence naming the field; the token never shown (dbt debug, errors);
no server at the URL is one plain sentence, quickly."""
import pytest

from dbt.adapters.logstore.config.profile_checks import ProfileFieldError, check_profile
from dbt.adapters.logstore.credentials import LogstoreConnectionMethod, LogstoreCredentials
from dbt.adapters.logstore.spark.connect import ConnectUnreachable, connect_target, session_for

WHERE = "of the profile 'shop' (target 'dev'): "


def creds(**fields):
    return LogstoreCredentials.from_dict({"method": "connect", "schema": "s", **fields})


def test_the_method_is_read_and_equals_dbt_sparks_names():
    from dbt.adapters.spark.connections import SparkConnectionMethod

    assert creds(host="sc://h:1").method == LogstoreConnectionMethod.CONNECT == "connect"
    session = LogstoreCredentials.from_dict({"method": "session", "schema": "s"})
    assert session.method == SparkConnectionMethod.SESSION and session.host == "localhost"


@pytest.mark.parametrize("host, token, use_ssl, url", [
    ("sc://localhost:15002", None, False, "sc://localhost:15002"),
    ("sc://spark.example.com", None, False, "sc://spark.example.com:15002"),
    ("sc://h:443/;use_ssl=true;token=abc", None, False, "sc://h:443/;use_ssl=true;token=abc"),
    ("sc://h:443", "abc", True, "sc://h:443/;token=abc;use_ssl=true"),
    ("sc://h:443/;token=abc", "abc", False, "sc://h:443/;token=abc"),
    ("sc://[::1]:15002/;user_id=dbt", None, False, "sc://[::1]:15002/;user_id=dbt"),
])
def test_the_url_the_client_connects_with(host, token, use_ssl, url):
    target = connect_target(host, token, use_ssl)
    assert target.url == url
    assert "abc" not in target.shown and target.address == url.split(";")[0].rstrip("/")


@pytest.mark.parametrize("fields, says", [
    ({"host": "localhost:15002"},
     "'localhost:15002' is not a Spark Connect URL: give a Spark Connect URL, sc://host:port"),
    ({"host": "sc://h:15002/db"}, "has a path ('/db'), which a Spark Connect URL does not"),
    ({"host": "sc://h:port"}, "'sc://h:port' has no valid port"),
    ({"host": "sc://:15002"}, "names no host"),
    ({"host": "sc://h/;token"}, "has a parameter that is not name=value ('token')"),
    ({"host": "sc://h/;use_ssl=yes"}, "has use_ssl='yes': give use_ssl=true or use_ssl=false."),
    ({"host": "sc://h/;token=one", "token": "two"},
     "'sc://h/;token=***' has a token, and the profile's token field another"),
])
def test_a_bad_host_is_one_sentence_naming_the_field(fields, says):
    with pytest.raises(ProfileFieldError) as info:
        check_profile(creds(**fields), "shop", "dev")
    message = str(info.value.msg)
    assert message.startswith("Field host " + WHERE), message
    assert says in message, message


def test_dbt_debug_shows_the_url_without_its_token():
    shown = dict(creds(host="sc://h:443/;token=s3cret;use_ssl=true").connection_info())
    assert shown["host"] == "sc://h:443/;token=***;use_ssl=true"
    assert list(shown) == ["host", "schema", "method", "kafka_bootstrap_servers"]  # no port 443
    assert "s3cret" not in repr(list(creds(host="sc://h/;token=s3cret").connection_info()))


def test_no_server_is_one_plain_sentence_without_the_token():
    """Nothing listens at the port: no ten minutes of the client's retries, no UserWarning."""
    import socket
    import time
    import warnings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    target = connect_target(f"sc://127.0.0.1:{port}/;token=s3cret")
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConnectUnreachable) as info:
            session_for(target, {"spark.sql.ansi.enabled": "false"})
    assert time.monotonic() - started < 10
    message = str(info.value.msg)
    assert message.startswith(f"no Spark Connect server answered at sc://127.0.0.1:{port} ("), message
    assert "s3cret" not in message


def test_a_server_that_stops_answering_in_a_run_is_one_sentence_then_no_more_waiting():
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.logstore.spark.connect import ConnectCursor

    class Client:
        policies = None

        def set_retry_policies(self, policies):
            self.policies = policies

    class Gone:
        _client = Client()

        def sql(self, sql):
            raise RuntimeError('<_MultiThreadedRendezvous of RPC that terminated with: status = '
                               'StatusCode.UNAVAILABLE details = "failed to connect to all addresses; '
                               'last error: UNKNOWN: ipv4:127.0.0.1:15002: Failed to connect to remote '
                               'host: Connection refused">')

    cursor = ConnectCursor(Gone(), connect_target("sc://127.0.0.1:15002/;token=s3cret"))
    with pytest.raises(DbtRuntimeError) as raised:
        cursor.execute("select 1")
    text = str(raised.value)
    assert "the Spark Connect server at sc://127.0.0.1:15002 stopped answering" in text, text
    assert "Connection refused" in text and "s3cret" not in text
    assert "next run settles" in text
    # what the failed run still asks (clean-up, the lock's release) fails at once
    assert [p.max_retries for p in Gone._client.policies] == [0]
