"""The package's modules import each other without a circle (read with `ast`, so imports inside
functions count too): a newcomer can read them in an order where each uses only what came before.
And only the kafka sub-package knows a Kafka client: the rest reaches Kafka through the
log_system interface, so another log system can plug in beside it."""
import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = "dbt.adapters.logstore"
ROOT = Path(__file__).resolve().parents[2] / "dbt" / "adapters" / "logstore"
KAFKA_PACKAGE = f"{PACKAGE}.kafka"  # the one place that may import a Kafka client
CLIENTS = {"kafka", "confluent_kafka"}  # kafka-python's and confluent-kafka's top-level modules


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join((PACKAGE, *parts)).removesuffix(".__init__")


def imports_of(path: Path, modules: Set[str]) -> Set[str]:
    """The package's modules that `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from package import module` imports the module
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in modules}
    return found


def import_graph() -> Dict[str, Set[str]]:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {name: imports_of(path, set(paths)) - {name} for name, path in paths.items()}
    # the package itself imports its adapter for dbt's plugin: an edge every module would close
    graph.pop(PACKAGE, None)
    return {name: deps - {PACKAGE} for name, deps in graph.items()}


def imported_names(path: Path, root: Path = ROOT) -> Set[str]:
    """Every module name `path` imports, anywhere in it, relative imports made absolute
    (`from a import b` names both a and a.b: b may be a module)."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def kafka_boundary_violations(root: Path = ROOT) -> List[str]:
    """'module imports name' for each module outside the kafka sub-package that imports a Kafka
    client or anything of the sub-package (a string naming it, as log_system.BUILT_IN does, is
    not an import)."""
    def inside(name: str) -> bool:
        return name == KAFKA_PACKAGE or name.startswith(KAFKA_PACKAGE + ".")

    violations = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        if inside(module):
            continue
        for name in sorted(imported_names(path, root)):
            if name.split(".")[0] in CLIENTS or inside(name):
                violations.append(f"{module} imports {name}")
    return violations


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import circle of `graph` as [a, b, ..., a], or [] when there is none."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 15 and any(graph.values())  # the graph was read
    cycle = find_cycle(graph)
    assert not cycle, "import circle: " + " -> ".join(cycle)


def test_a_circle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_only_the_kafka_sub_package_imports_a_kafka_client():
    assert (ROOT / "kafka" / "reading.py").exists()  # the sub-package is where this test looks
    assert any("kafka" in imported_names(p) for p in (ROOT / "kafka").glob("*.py"))  # read
    violations = kafka_boundary_violations()
    assert not violations, "outside dbt/adapters/logstore/kafka/: " + "; ".join(violations)


def test_a_kafka_import_outside_the_sub_package_is_found(tmp_path):
    files = {
        "kafka/__init__.py": "",
        "kafka/reading.py": "from kafka import KafkaConsumer\nimport confluent_kafka\n",
        "log_system.py": 'BUILT_IN = {"kafka": "dbt.adapters.logstore.kafka.log_system:X"}\n',
        "reader.py": "def read():\n    from kafka.errors import KafkaError\n",
        "status.py": "from dbt.adapters.logstore.kafka.config import consumer_config\n",
        "cli.py": "from . import kafka\n",
        "bench.py": "import confluent_kafka\n",
        "plain.py": "from dbt.adapters.logstore.log_system import get_log_system\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert kafka_boundary_violations(tmp_path) == [
        f"{PACKAGE}.bench imports confluent_kafka",
        f"{PACKAGE}.cli imports {PACKAGE}.kafka",
        f"{PACKAGE}.reader imports kafka.errors",
        f"{PACKAGE}.reader imports kafka.errors.KafkaError",
        f"{PACKAGE}.status imports {KAFKA_PACKAGE}.config",
        f"{PACKAGE}.status imports {KAFKA_PACKAGE}.config.consumer_config",
    ]
