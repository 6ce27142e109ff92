"""The mirror's walk through the package: one logged `dbt run` (in this process, the session
method, on the Apache Kafka of `python -m tests.kafka_cluster run --`), and while the adapter
mirrors a change set (`mirror_change_set`), every call from one of the package's functions to
another is recorded. It prints:

- modules entered: the package's modules whose functions the mirror calls;
- stays / moves: distinct call edges (caller function -> callee function) inside one module /
  between two modules;
- climbs back: moves into a module on a higher floor of the import graph than the caller's
  (floor: the longest chain of imports under a module), i.e. calls back up the layers;
- lookups: calls that look up the log system, its clients' settings or its address
  (get_log_system, open_model_log, client_config, resolve_clients, servers_setting), in the
  mirror and in the whole run of the model.

It reads whichever layout the checkout has, so the same command measures a tree before and
after a change of layout:

    python -m tests.kafka_cluster run -- python benchmarks/mirror_walk.py
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Dict, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.functional.fault_project import write_project  # noqa: E402
from tests.unit.test_import_graph import PACKAGE, import_graph  # noqa: E402

LOOKUPS = {"get_log_system", "open_model_log", "client_config", "resolve_clients", "servers_setting"}
MODEL = """
{{ config(materialized='table', unique_key='id', log_system='kafka',
          kafka_topic='walk_' ~ var('suffix')) }}
select id, concat('v', cast({{ var('step') }} as string)) as version from range(50) as r(id)
"""


def floors() -> Dict[str, int]:
    graph = import_graph()
    memo: Dict[str, int] = {}

    def floor(module: str) -> int:
        if module not in memo:
            memo[module] = 0
            memo[module] = 1 + max((floor(d) for d in graph.get(module, ()) if d in graph), default=-1)
        return memo[module]

    return {module: floor(module) for module in graph}


class Walk:
    def __init__(self) -> None:
        self.edges: Set[Tuple[str, str, str, str]] = set()  # caller module, function, callee's
        self.lookups: Counter = Counter()  # in the mirror
        self.run_lookups: Counter = Counter()  # in the whole run
        self.inside = False  # in mirror_change_set

    def profile(self, frame, event, arg):  # sys.setprofile's hook
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        name = frame.f_code.co_name
        if name in LOOKUPS:
            self.run_lookups[name] += 1
            self.lookups[name] += self.inside
        if not self.inside:
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith(PACKAGE):
            caller = caller.f_back
        if caller is not None:
            self.edges.add((caller.f_globals["__name__"], caller.f_code.co_name, module, name))

    def report(self) -> str:
        floor = floors()
        short = lambda m: m.removeprefix(PACKAGE + ".") or "__init__"  # noqa: E731
        entered = sorted({callee for _, _, callee, _ in self.edges}, key=lambda m: (floor.get(m, 0), m))
        stays = [e for e in self.edges if e[0] == e[2]]
        moves = [e for e in self.edges if e[0] != e[2]]
        climbs = sorted(e for e in moves if floor.get(e[2], 0) > floor.get(e[0], 0))
        lines = [f"modules entered: {len(entered)} ({', '.join(map(short, entered))})",
                 f"stays: {len(stays)}, moves: {len(moves)}, climbs back: {len(climbs)}",
                 f"lookups in the mirror: {sum(self.lookups.values())} "
                 + str({k: v for k, v in sorted(self.lookups.items()) if v}),
                 f"lookups in the model's run: {sum(self.run_lookups.values())} "
                 + str(dict(sorted(self.run_lookups.items())))]
        lines += [f"  climb: {short(a)}.{f} -> {short(b)}.{g}" for a, f, b, g in climbs]
        return "\n".join(lines)


def main() -> int:
    from dbt.cli.main import dbtRunner

    servers = os.environ["LOGSTORE_TEST_APACHE_KAFKA"]
    root = Path(tempfile.mkdtemp(prefix="mirror_walk_"))
    write_project(root, f"walk_{uuid.uuid4().hex[:8]}", servers, None, models={"walked": MODEL})
    layout = "commit.mirror" if (ROOT / "dbt/adapters/logstore/commit/mirror.py").exists() else "mirror"
    mirror = importlib.import_module(f"{PACKAGE}.{layout}")
    walk, plain = Walk(), mirror.mirror_change_set

    def walked(*args, **kwargs):
        walk.inside = True
        try:
            return plain(*args, **kwargs)
        finally:
            walk.inside = False

    mirror.mirror_change_set = walked
    suffix = uuid.uuid4().hex[:8]
    for step in (1, 2):  # the second run mirrors an update of every row
        walk.__init__()
        threading.setprofile(walk.profile)  # dbt runs the model on a thread of its own
        try:
            result = dbtRunner().invoke(["run", "--project-dir", str(root), "--profiles-dir", str(root),
                                         "--vars", f"{{step: {step}, suffix: '{suffix}'}}"])
        finally:
            threading.setprofile(None)
        if not result.success:
            print(f"dbt run failed: {result.exception}", file=sys.stderr)
            return 1
    print(f"the mirror's walk ({ROOT.name}, one mirror of an update of 50 rows):")
    print(walk.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
