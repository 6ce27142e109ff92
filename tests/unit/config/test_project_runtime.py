"""A project's profile read from outside a dbt invocation renders env_var() as dbt does (issue
51: the profile check of every `dbt-logstore` command failed on it). Each case runs in a fresh
Python process: a process that ran dbt before (as this test process may have) has an invocation
context left over, and would not show the failure."""
import os
import subprocess
import sys
import textwrap

import pytest

PROFILES = """\
shop:
  target: "{{ env_var('SHOP_TARGET', 'dev') }}"
  outputs:
    dev:
      type: logstore
      method: session
      schema: "{{ env_var('SHOP_SCHEMA', 'analytics') }}"
      kafka_bootstrap_servers: "{{ env_var('SHOP_SERVERS') }}"
    bad:
      type: logstore
      method: session
      schema: analytics
      kafka_bootstrap_servers: "{{ env_var('DBT_ENV_SECRET_SHOP_SERVERS') }}"
"""
CHECK = textwrap.dedent("""
    import sys
    from dbt.adapters.logstore.config.profile_checks import check_project_profile
    from dbt.adapters.logstore.config.project_runtime import runtime_config
    project, target = sys.argv[1], sys.argv[2] or None
    try:
        check_project_profile(project, project, target, {})
    except Exception as exc:
        print("refused:", type(exc).__name__, exc.msg)
        sys.exit(0)
    config = runtime_config(project, project, target, {})
    print(config.target_name, config.credentials.schema, config.credentials.kafka_bootstrap_servers)
""")


def check(tmp_path, target="", **env):
    (tmp_path / "dbt_project.yml").write_text(
        "name: shop\nversion: '1.0'\nconfig-version: 2\nprofile: shop\n")
    (tmp_path / "profiles.yml").write_text(PROFILES)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHOP_", "DBT_ENV_"))}
    result = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path), target],
                            env={**clean, **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


def test_variables_set_and_defaults(tmp_path):
    assert check(tmp_path, SHOP_SERVERS="kafka1:9092") == "dev analytics kafka1:9092"
    assert check(tmp_path, SHOP_SERVERS="k:1", SHOP_SCHEMA="crm") == "dev crm k:1"


def test_a_missing_variable_is_named(tmp_path):
    assert check(tmp_path) == ("refused: ProfileReadError dbt could not read the project at "
                               f"{tmp_path} with the profiles in {tmp_path}: Env var required "
                               "but not provided: 'SHOP_SERVERS'")


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_target_from_the_flag_or_the_environment(tmp_path, how):
    secret = {"DBT_ENV_SECRET_SHOP_SERVERS": "127.0.0.1:90x2"}
    line = (check(tmp_path, "bad", **secret) if how == "flag"
            else check(tmp_path, SHOP_TARGET="bad", **secret))
    # the profile check names the field; the secret's value is masked in dbt's error text
    assert line == ("refused: ProfileFieldError Field kafka_bootstrap_servers of the profile "
                    "'shop' (target 'bad'): '*****': the port '90x2' is not a number from 1 to 65535.")
