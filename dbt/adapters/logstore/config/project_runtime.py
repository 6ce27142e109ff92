"""dbt's configuration of a project (profile, dbt_project.yml, --vars) read from outside a dbt
invocation, as the `dbt-logstore` commands read it: rendered exactly as `dbt run` renders it,
`env_var()` included."""
from __future__ import annotations

from argparse import Namespace
from typing import Any, Dict, Optional


def ensure_invocation_context() -> None:
    """dbt's `env_var()` reads the environment of the current dbt invocation, which dbt's CLI
    sets when a command starts (dbt.cli.requires.preflight). Outside a dbt command there is
    none, and rendering a profile that reads the environment fails; set it as dbt does. An
    existing one (an earlier dbt invocation in this process, or dbt's test fixtures) is dbt's
    own and is kept."""
    from dbt_common.clients.system import get_env
    from dbt_common.context import set_invocation_context, try_get_invocation_context

    if try_get_invocation_context() is None:
        set_invocation_context(get_env())


def runtime_config(project_dir: str, profiles_dir: str, target: Optional[str],
                   vars: Dict[str, Any]) -> Any:
    """dbt's RuntimeConfig of the project (with its profile's credentials) for these arguments
    of a dbt command."""
    from dbt import flags
    from dbt.config.runtime import RuntimeConfig

    ensure_invocation_context()
    args = Namespace(project_dir=str(project_dir), profiles_dir=profiles_dir, target=target,
                     profile=None, threads=None, vars=dict(vars))
    flags.set_from_args(args, {})
    return RuntimeConfig.from_args(args)
