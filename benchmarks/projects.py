"""The benchmarks' dbt side: the rows their keyed model selects, the model, the profile of a local
Spark session, a throw-away project holding them, and one `dbt run` of it in this process."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

# The benchmark model's rows: a keyed table (id) of customers, one row per id of range(rows);
# `note` is what a rebuild changes. benchmarks/diff.py and cluster.py build these rows in Spark.
ROWS_SQL = """select id, concat('customer-', cast(id as string)) as name,
       cast(id * 1.5 as decimal(12, 2)) as amount,
       date_add(date'2024-01-01', cast(id % 365 as int)) as day, {note} as note
from range({rows})"""

# The model of benchmarks/mirror.py and cluster.py: its first build (step 1) logs every row; step
# 2 changes 1% of them.
MODEL = """
{{ config(materialized='table', unique_key='id',
          **{'log.system': var('log_system', 'kafka'), 'kafka.topic': var('topic', 'bench') ~ '.' ~ this.name,
             'log.consistency': var('consistency', 'transactional'),
             'log.mirror.parallelism': var('parallelism', 1),
             'log.system.partitions': var('partitions', 1)}) }}
""" + ROWS_SQL.format(
    note="{% if var('step', 1) == 2 %} case when id % 100 = 7 then 'changed' else 'same' end "
         "{% else %} 'same' {% endif %}",
    rows="{{ var('rows', 1000) }}") + "\n"

# A local Spark session (method session); the children's environment fills it in
# (harness.child_environment).
PROFILE = """
bench:
  target: dev
  outputs:
    dev:
      type: logstore
      method: session
      schema: bench
      threads: 1
      kafka_bootstrap_servers: "{{ env_var('BENCH_BOOTSTRAP_SERVERS') }}"
      kafka_client: "{{ env_var('BENCH_KAFKA_CLIENT', 'kafka-python') }}"
      session_dir: "{{ env_var('BENCH_SESSION_DIR') }}"
      server_side_parameters:
        spark.sql.shuffle.partitions: "4"
        spark.sql.session.timeZone: UTC
"""


def write_project(root: Path, models: Dict[str, str], profile: Optional[str] = PROFILE) -> Path:
    """A dbt project `bench` under root/project with these models (name -> SQL) and, when given,
    its profiles.yml beside them."""
    project = root / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: bench\nversion: '1.0'\nprofile: bench\nmodel-paths: ['models']\n")
    if profile is not None:
        (project / "profiles.yml").write_text(profile)
    for name, sql in models.items():
        (project / "models" / f"{name}.sql").write_text(sql)
    return project


def run_dbt(project: Path, variables: Dict[str, Any], select: Optional[str] = None,
            profiles_dir: Optional[str] = None, target: Optional[str] = None,
            log_path: Optional[str] = None) -> Dict[str, Any]:
    """`dbt run` in this process: the first model's execution time ("seconds") and its adapter
    response (rows_mirrored, log_seconds, ...). SystemExit naming the failure when it fails."""
    from dbt.cli.main import dbtRunner

    args = ["run", "--project-dir", str(project), "--profiles-dir", str(profiles_dir or project),
            "--vars", json.dumps(variables), "--quiet"]
    for option, value in (("--target", target), ("--log-path", log_path), ("--select", select)):
        if value:
            args += [option, value]
    result = dbtRunner().invoke(args)
    if not result.success:
        messages = [r.message for r in getattr(result.result, "results", None) or [] if r.message]
        raise SystemExit(f"dbt run failed: {result.exception or '; '.join(messages)}")
    node = result.result.results[0]
    return {"seconds": node.execution_time, **dict(node.adapter_response)}
