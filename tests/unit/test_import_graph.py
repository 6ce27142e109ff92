"""The package's layout rules, read from the code with `ast` (imports inside functions count too):
- no import circle: a newcomer can read the modules in an order where each uses only what came
  before;
- no upward import: the sub-packages stand in layers (LAYERS, foundation first), and a module
  imports only from its own layer or the ones below it;
- every module within its size (MAX_LINES; impl.py, dbt's adapter, IMPL_MAX_LINES);
- only the Kafka sub-package (log/kafka/) knows a Kafka client: the rest reaches Kafka through
  the log_system interface, so another log system can plug in beside it."""
import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = "dbt.adapters.logstore"
ROOT = Path(__file__).resolve().parents[2] / "dbt" / "adapters" / "logstore"
KAFKA_PACKAGE = f"{PACKAGE}.log.kafka"  # the one place that may import a Kafka client
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
    assert (ROOT / "log" / "kafka" / "reading.py").exists()  # the sub-package is where this test looks
    assert any("kafka" in imported_names(p) for p in (ROOT / "log" / "kafka").glob("*.py"))  # read
    violations = kafka_boundary_violations()
    assert not violations, "outside dbt/adapters/logstore/log/kafka/: " + "; ".join(violations)


def test_a_kafka_import_outside_the_sub_package_is_found(tmp_path):
    files = {
        "log/__init__.py": "",
        "log/kafka/__init__.py": "",
        "log/kafka/reading.py": "from kafka import KafkaConsumer\nimport confluent_kafka\n",
        "log/log_system.py": 'BUILT_IN = {"kafka": "dbt.adapters.logstore.log.kafka.log_system:X"}\n',
        "reader.py": "def read():\n    from kafka.errors import KafkaError\n",
        "status.py": "from dbt.adapters.logstore.log.kafka.config import consumer_config\n",
        "log/cli.py": "from . import kafka\n",
        "bench.py": "import confluent_kafka\n",
        "plain.py": "from dbt.adapters.logstore.log.log_system import get_log_system\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert kafka_boundary_violations(tmp_path) == [
        f"{PACKAGE}.bench imports confluent_kafka",
        f"{PACKAGE}.log.cli imports {KAFKA_PACKAGE}",
        f"{PACKAGE}.reader imports kafka.errors",
        f"{PACKAGE}.reader imports kafka.errors.KafkaError",
        f"{PACKAGE}.status imports {KAFKA_PACKAGE}.config",
        f"{PACKAGE}.status imports {KAFKA_PACKAGE}.config.consumer_config",
    ]


# The package's layers, foundation first: a module imports from its own layer and the ones
# below. The stages of a run read top-down in the folders (config -> changes -> commit -> log
# -> reading -> cli); the log's interface sits below the stages that use it, and the record
# formats below the configuration that names them.
LAYERS = [
    {"names", "faults", "__version__", "credentials"},  # the protocol's names; no imports
    {"spark"},  # what the adapter needs of Spark
    {"formats"},  # the record codec (the formats' own options are configuration's vocabulary)
    {"config"},  # stage 1
    {"log"},  # the LogSystem interface, control records, lifecycle, kafka
    {"changes"},  # stage 2
    {"commit"},  # stage 3
    {"reading", "reader", "replay"},  # stage 5 (reader.py, replay.py: the kept public paths)
    {"cli"},
    {"connections", "impl"},  # dbt's entry points
]
MAX_LINES, IMPL_MAX_LINES = 400, 550


def layer_of(module: str) -> int:
    first = module.removeprefix(PACKAGE + ".").split(".")[0]
    for number, names in enumerate(LAYERS):
        if first in names:
            return number
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    return sorted(f"{module} imports {dep}" for module, deps in graph.items() for dep in deps
                  if layer_of(dep) > layer_of(module))


def test_no_module_imports_from_a_layer_above_its_own():
    graph = import_graph()
    upward = upward_imports(graph)
    assert not upward, "upward imports: " + "; ".join(upward)


def test_an_upward_import_is_found():
    graph = {f"{PACKAGE}.spark.catalog": {f"{PACKAGE}.commit.protocol"},
             f"{PACKAGE}.commit.protocol": {f"{PACKAGE}.spark.catalog", f"{PACKAGE}.names"}}
    assert upward_imports(graph) == [f"{PACKAGE}.spark.catalog imports {PACKAGE}.commit.protocol"]


def test_every_module_is_within_its_size():
    """The package's modules, and the benchmarks' (their own folder, the same rule)."""
    paths = [*ROOT.rglob("*.py"), *(ROOT.parents[2] / "benchmarks").glob("*.py")]
    sizes = {path.relative_to(ROOT.parents[2]): len(path.read_text().splitlines()) for path in paths}
    assert len(sizes) > 50
    over = [f"{path}: {lines} lines" for path, lines in sorted(sizes.items())
            if lines > (IMPL_MAX_LINES if path.name == "impl.py" else MAX_LINES)]
    assert not over, f"over {MAX_LINES} lines (impl.py {IMPL_MAX_LINES}): " + "; ".join(over)
