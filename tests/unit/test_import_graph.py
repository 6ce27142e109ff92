"""The package's modules import each other without a circle (read with `ast`, so imports inside
functions count too): a newcomer can read them in an order where each uses only what came before."""
import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = "dbt.adapters.logstore"
ROOT = Path(__file__).resolve().parents[2] / "dbt" / "adapters" / "logstore"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
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
