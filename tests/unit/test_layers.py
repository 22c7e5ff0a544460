"""spmd's modules import one way: no cycle, and no import of a higher layer, counting imports inside
functions. The graph is read from the source (ast), not from what happens to be imported."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import spmd

ROOT = Path(spmd.__file__).parent

# Top to bottom (docs/architecture.md): a module may import its own layer or a lower one, never a higher.
LAYERS = [
    ("commands and the public face", ["cli", "__main__", "__init__"]),
    ("sweeps, jobscripts", ["scale"]),
    ("one run", ["job"]),
    ("workloads", ["workloads"]),
    ("services", ["io", "comm", "measure", "report"]),
    ("foundations", ["core"]),
]
MAX_LINES = 500


def modules() -> dict[str, Path]:
    """Dotted name (without 'spmd.'; the package itself is '__init__') -> file, for every module."""
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The spmd modules the file at ``path`` imports anywhere in its source (functions included)."""
    package = list(path.parent.relative_to(ROOT).parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            stems, names = [a.name for a in node.names], []
        elif isinstance(node, ast.ImportFrom) and node.level:  # relative: from the file's package up
            base = package[: len(package) - node.level + 1]
            stems, names = [".".join(base + ([node.module] if node.module else []))], [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            stems, names = [node.module or ""], [a.name for a in node.names]
        else:
            continue
        for stem in stems:
            if not node_is_relative(node):
                if stem != "spmd" and not stem.startswith("spmd."):
                    continue  # not spmd's
                stem = stem.removeprefix("spmd").lstrip(".")
            submodules = [f"{stem}.{n}".lstrip(".") for n in names if f"{stem}.{n}".lstrip(".") in known]
            # `from . import xp` imports the module xp; `from .x import name`, the module x
            for target in submodules or [stem]:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                found.add(target or "__init__")
    return found - {module_name(path)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def node_is_relative(node) -> bool:
    return isinstance(node, ast.ImportFrom) and node.level > 0


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(path, set(mods)) for name, path in mods.items()}


def layer_of(name: str) -> int:
    top = name.split(".")[0]
    for index, (_, members) in enumerate(LAYERS):
        if top in members:
            return index
    raise AssertionError(f"spmd.{name} is in no layer of tests/unit/test_layers.py: place it")


def test_the_graph_is_read_from_the_source(graph):
    """The reader itself: it must see imports inside functions and relative imports of every depth."""
    assert "workloads.registry" in graph["job"]
    assert "core.watched" in graph["core.runtime"]
    assert "io.weak" in graph["workloads.base"]
    assert "core.watchdog" in graph["cli.main"]  # imported inside _fail
    assert "io.plan" in graph["workloads.training.data"]  # three dots up


def test_every_module_has_a_layer(graph):
    for name in graph:
        layer_of(name)


def test_no_import_points_up(graph):
    upward = [
        f"spmd.{a} ({LAYERS[layer_of(a)][0]}) imports spmd.{b} ({LAYERS[layer_of(b)][0]})"
        for a, targets in graph.items()
        for b in targets
        if layer_of(b) < layer_of(a)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle(graph):
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_config_parsing_imports_no_workload(graph):
    reachable, todo = set(), ["core.config"]
    while todo:
        for nxt in graph[todo.pop()] - reachable:
            reachable.add(nxt)
            todo.append(nxt)
    assert not [m for m in reachable if m.startswith("workloads")], reachable


def test_the_capture_is_one_component_entered_from_the_job(graph):
    """The profiler's window, its files and its analysis live in report/capture; outside the report, only job.py
    enters it, and no workload imports it (a workload runs its steps in the window it is handed)."""
    assert {m.split(".")[-1] for m in graph if m.startswith("report.capture.")} >= {
        "window",
        "component",
        "kernels",
        "causes",
    }
    entering = {a for a, targets in graph.items() for b in targets if b.startswith("report.capture")}
    outside = {a for a in entering if not a.startswith("report.")}
    assert outside == {"job"}, outside
    import spmd.workloads.base as base

    hooks = [name for name in vars(base.Workload) if "captur" in name.lower()]
    assert not hooks and not hasattr(base, "Captured"), hooks


def test_package_faces_hold_no_code():
    for path in ROOT.rglob("__init__.py"):
        tree = ast.parse(path.read_text())
        code = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        if path.parent == ROOT:  # spmd itself: its version, and the public names loaded on first use
            code = [
                n
                for n in code
                if not isinstance(n, (ast.ImportFrom, ast.Assign))
                and not (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
            ]
        assert not code, f"{path.relative_to(ROOT.parent)}: a package face holds code; give it a module"


def test_long_modules_are_a_prompt_to_look():
    """A module over 500 lines is named in pytest's warnings: a prompt to see whether it mixes jobs, never a reason
    to cut it by a line count."""
    long = {
        str(p.relative_to(ROOT.parent)): n
        for p in ROOT.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    if long:
        warnings.warn(f"modules over {MAX_LINES} lines (do they mix jobs?): {long}", stacklevel=1)


def test_bench_uses_no_private_name_of_spmd():
    """bench/ sits beside spmd/ and uses only its public names: no ``from spmd.x import _y``, no ``mod._y`` on a
    module of spmd it imported (a private name may change without notice; make it public or leave it)."""
    found = []
    for path in sorted((ROOT.parent / "bench").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        spmd_modules = set()  # local names bound to spmd's modules
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                spmd_modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("spmd")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spmd"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{path.name}:{node.lineno} imports {node.module}.{a.name}")
                    spmd_modules.add(a.asname or a.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in spmd_modules
            ):
                found.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not found, "\n".join(found)


def test_tests_share_builders_through_helpers_only():
    """A test module imports no other test module: what tests share lives in tests/helpers.py."""
    tests = ROOT.parent / "tests"
    found = [
        f"{path.relative_to(tests)}:{node.lineno} imports {name}"
        for path in sorted(tests.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        if name.split(".")[-1].startswith("test_")
    ]
    assert not found, "\n".join(found)
