"""The install README.md gives, as a new user runs it: `make wheel` (in a copy of the source
tree, so the checkout's dist/ and build/ stay as they are), a fresh virtual environment, the
wheel installed with README.md's own `pip install ... dist/dbt_logstore-...whl` line, then,
with only what that installed: `dbt-logstore broker start`, `dbt debug` and `dbt run` of one
logged model in a throwaway project, whose run says what it mirrored.

pip resolves from its cache (constraints.txt pins pyspark, whose wheel pip built once), so this
takes about as long as unpacking the dependencies and two Spark sessions. README.md names the
wheel with its version: a version without a README to match fails here."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.cli.broker import free_port
from tests.functional.dbt_helpers import servers_from_env
from tests.spark_jvm import SPARK_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
MODEL = """{{ config(materialized='table', unique_key='customer_id',
          **{'log.system': 'kafka', 'kafka.topic': 'install.customers'}) }}
select * from values (1, 'Ada'), (2, 'Grace'), (3, 'Linus') as t(customer_id, full_name)
"""


def readme_wheel_install() -> List[str]:
    """README.md's command that installs the built wheel."""
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("pip install") and "dist/dbt_logstore-" in line:
            return shlex.split(line.split(" #")[0])
    raise AssertionError("README.md has no `pip install ... dist/dbt_logstore-...whl` line")


def clean_env() -> Dict[str, str]:
    """This machine's environment without what the test session sets for its own Spark and
    Python (a new user has none of it). pip's settings (its cache, find-links) stay, and the
    tests' JVM options (tests/spark-conf: C1 only, no code generation, as SPARK_CONF_DIR) keep
    Spark's start short and change no result."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_SUBMIT_ARGS",
                        "SPARK_SUBMIT_OPTS", "DBT_PROFILES_DIR", "LOGSTORE_STATE_DIR")}
    return {**env, "SPARK_CONF_DIR": str(SPARK_DEFAULTS.parent)}


def run(command: List[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    started = time.monotonic()
    result = subprocess.run(command, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                            timeout=timeout)
    print(f"{time.monotonic() - started:6.1f} s  {' '.join(command[:3])} ...: exit code "
          f"{result.returncode}")
    if result.returncode != 0:  # dbt's lines, without the JVM's stack frames
        lines = [line for line in (result.stdout + result.stderr).splitlines()
                 if not line.lstrip().startswith(("at ", "... "))]
        raise AssertionError("\n".join(lines)[-6000:])
    return result


def test_readme_install_runs_a_logged_model(tmp_path):
    # `make wheel`, in a copy of what the wheel is built from
    src = tmp_path / "src"
    shutil.copytree(REPO / "dbt", src / "dbt", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "Makefile", "constraints.txt"):
        shutil.copy(REPO / name, src / name)
    run(["make", "-s", "wheel", f"BIN={Path(sys.executable).parent}"], cwd=src)
    wheels = [p.name for p in (src / "dist").glob("*.whl")]
    assert wheels == [f"dbt_logstore-{version}-py3-none-any.whl"]

    command = readme_wheel_install()
    assert f"dist/{wheels[0]}" in " ".join(command), f"README.md installs another wheel: {command}"

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    bin_dir = venv / "bin"
    # README.md's line, its pip the venv's; --no-compile: no .pyc files written for the ~30,000
    # modules of pyspark, pandas, dbt... (Python compiles what it imports anyway)
    run([str(bin_dir / "pip"), *command[1:], "--no-compile"], cwd=src)

    # what runs is the installed package, not this checkout
    where = run([str(bin_dir / "python"), "-c", "import dbt.adapters.logstore as m; print(m.__file__)"],
                cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv)), where
    assert run([str(bin_dir / "dbt-logstore"), "--version"], cwd=tmp_path).stdout == \
        f"dbt-logstore {version}\n"

    port = free_port()
    servers = f"127.0.0.1:{port}"
    state = tmp_path / "broker"
    run([str(bin_dir / "dbt-logstore"), "broker", "start", "--port", str(port),
         "--state-dir", str(state)], cwd=tmp_path)
    try:
        project = tmp_path / "project"
        (project / "models").mkdir(parents=True)
        (project / "models" / "customers.sql").write_text(MODEL)
        (project / "dbt_project.yml").write_text(
            "name: install_check\nversion: '1.0'\nconfig-version: 2\nprofile: install_check\n")
        (project / "profiles.yml").write_text(f"""install_check:
  target: dev
  outputs:
    dev:
      type: logstore
      method: session
      schema: analytics
      kafka_bootstrap_servers: "{servers_from_env(servers)}"
      session_dir: {project / 'spark'}
      threads: 1
      server_side_parameters:
        spark.sql.shuffle.partitions: "2"
        spark.sql.session.timeZone: "UTC"
""")
        dbt = [str(bin_dir / "dbt")]
        where_args = ["--project-dir", str(project), "--profiles-dir", str(project)]
        debug = run([*dbt, "debug", *where_args], cwd=project).stdout
        assert "All checks passed!" in debug, debug[-3000:]
        assert f"Kafka at {servers}: reachable" in debug, debug[-3000:]

        output = run([*dbt, "run", *where_args], cwd=project).stdout
        mirrored = [line.strip() for line in output.splitlines() if "mirrored" in line]
        print("\n".join(mirrored))
        assert any(re.search(r"OK, mirrored 3 records to install\.customers", line)
                   for line in mirrored), output[-3000:]
    finally:
        run([str(bin_dir / "dbt-logstore"), "broker", "stop", "--port", str(port),
             "--state-dir", str(state)], cwd=tmp_path)
