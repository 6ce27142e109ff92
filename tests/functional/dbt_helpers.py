"""Small helpers for running dbt in functional tests."""
import json
from pathlib import Path

import yaml
from dbt.tests.util import run_dbt_and_capture

from dbt.adapters.logstore.reading.project import DbtProject
from dbt.adapters.logstore.reading.status import model_status


# The suite's profiles read their Kafka servers as most real profiles do, through env_var() (an
# unset variable with the servers as its default): every dbt and dbt-logstore command of the
# suite renders it (issue 51: a profile check built outside dbt's invocation could not).
SERVERS_VARIABLE = "LOGSTORE_TEST_PROFILE_SERVERS"


def servers_from_env(servers):
    """The profile's kafka_bootstrap_servers for `servers`, read through env_var()."""
    assert "'" not in servers, servers
    return "{{ env_var('%s', '%s') }}" % (SERVERS_VARIABLE, servers)


def failure_text(args):
    """The error text of a dbt command that must fail, at parse time (raised) or at run time,
    with whitespace collapsed so messages can be matched across line breaks."""
    try:
        _, out = run_dbt_and_capture(args, expect_pass=False)
    except Exception as exc:  # parse-time errors abort the whole invocation
        out = str(exc)
    return " ".join(out.split())


def logstore_statuses(project):
    """`dbt-logstore status --verify` of every logged model of a dbt test `project`, in this
    process (its Spark session: a second process cannot open the same Derby metastore)."""
    dbt_project = DbtProject(project.project_root, profiles_dir=project.profiles_dir)
    with dbt_project.connection():
        return {m.name: model_status(dbt_project, m, verify=True) for m in dbt_project.logged_models()}


def project_name(project):
    """The `name` of a dbt test `project`'s dbt_project.yml (its run topic's)."""
    return yaml.safe_load((Path(project.project_root) / "dbt_project.yml").read_text())["name"]


def last_invocation(project):
    """The invocation id of the last dbt command run in a dbt test `project` (run_results.json)."""
    return json.loads((Path(project.project_root) / "target" / "run_results.json").read_text()
                      )["metadata"]["invocation_id"]
