"""The package's layout rules, read from the source with `ast` (nothing is imported).

- The product never imports the demo or the simulator: only the CLI commands
  that run them (`yuxi_dash/cli/`) and the two packages themselves may.
- No import cycle among yuxi_dash modules, counting imports inside functions
  too (a function-local import only hides a cycle until the function runs).
- The demo and the simulator import yuxi_dash modules at the top of the file
  only, so their dependencies are in plain sight.
- Nothing in yuxi_dash outside `yuxi_dash.ui` imports it: the CLI and the
  service take identity decisions from `yuxi_dash.access.roles`, not from the UI.
- No folder under yuxi_dash/ holds more than 15 modules side by side.
- The memory rooms import one way (`MEMORY_LAYERS`: graph, freshness, views, desk):
  a room imports only the rooms before it. The files and access rooms
  (`LOW_ROOMS`) import none of the rooms built on them (`HIGH_ROOMS`), nor do
  the background loop and the leader lease (`SHARED_PIECES`) the jobs build on.

An edge A -> B is an explicit `import B` / `from B import x` in A (`from P import m`
is an edge to the module P.m when it exists). Imports under `if TYPE_CHECKING:`
never run and are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "yuxi_dash"
SEPARATE = ("yuxi_dash.demo", "yuxi_dash.sim")  # the demo and the simulator
RUNNERS = ("yuxi_dash.cli",)  # the commands that run them: `demo`, `simulate`, `serve --demo`

# Cycles that exist outside the demo and the simulator and belong to other work.
# Each entry is one strongly connected set of modules; remove it once it is broken.
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()
UI = "yuxi_dash.ui"  # the Streamlit glue: only app.py, pages/ and the package itself use it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _product_files() -> list[tuple[str, Path]]:
    """Every product source file: yuxi_dash outside demo/, sim/ and cli/, plus app.py and pages/."""
    inside = [
        (name, path)
        for name, path in _package_modules().items()
        if not _within(name, SEPARATE + RUNNERS)
    ]
    pages = [(f"pages.{path.stem}", path) for path in sorted((REPO / "pages").glob("*.py"))]
    return [*inside, ("app", REPO / "app.py"), *pages]


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that can run, and whether it sits inside a function or class."""

    def walk(node: ast.AST, nested: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    yield from walk(other, nested)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, nested
            inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            yield from walk(child, nested or inner)

    yield from walk(tree, False)


def _targets(
    node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: set[str]
) -> set[str]:
    """The modules an import statement names (yuxi_dash ones only when `modules` is known)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = importer.split(".")
            anchor = anchor if is_package else anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
            for alias in node.names
        ]
    found = set()
    for name in names:
        while name and name not in modules:  # `import a.b.c`: the longest module it names
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _package_modules()
    names = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = set()
        for node, _nested in _imports(tree):
            graph[name] |= _targets(node, name, is_package, names) - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.append(frozenset(members))
    return found


def _describe(cycle: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = sorted(f"{a} -> {b}" for a in cycle for b in graph[a] & cycle)
    return "{" + ", ".join(sorted(cycle)) + "} via " + "; ".join(edges)


def test_the_product_never_imports_the_demo_or_the_simulator() -> None:
    modules = set(_package_modules())
    offenders = []
    for name, path in _product_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, _nested in _imports(tree):
            for target in _targets(node, name, path.name == "__init__.py", modules):
                if _within(target, SEPARATE):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} imports {target}")
    assert not offenders, "\n".join(offenders)


def test_no_import_cycle_among_yuxi_dash_modules() -> None:
    graph = _graph()
    assert "yuxi_dash.service" in graph and graph["yuxi_dash.service"]  # the walk found imports
    cycles = _cycles(graph)
    unknown = [_describe(cycle, graph) for cycle in cycles if cycle not in KNOWN_CYCLES]
    assert not unknown, "import cycles:\n" + "\n".join(unknown)
    gone = [sorted(cycle) for cycle in KNOWN_CYCLES if cycle not in cycles]
    assert not gone, f"these known cycles are broken now: remove them from KNOWN_CYCLES: {gone}"


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function() -> None:
    """The checker itself: a function-local import closing a loop is a cycle."""
    modules = {"p.a", "p.b", "p.c"}
    top = ast.parse("import p.b\n")
    hidden = ast.parse("def f():\n    from p import a\n")
    graph = {
        "p.a": set().union(*(_targets(n, "p.a", False, modules) for n, _ in _imports(top))),
        "p.b": set().union(*(_targets(n, "p.b", False, modules) for n, _ in _imports(hidden))),
        "p.c": set(),
    }
    assert _cycles(graph) == [frozenset({"p.a", "p.b"})]
    assert [nested for _, nested in _imports(hidden)] == [True]


def test_the_demo_and_the_simulator_import_yuxi_dash_at_the_top_only() -> None:
    modules = _package_modules()
    names = set(modules)
    hidden = []
    for name, path in modules.items():
        if not _within(name, SEPARATE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, nested in _imports(tree):
            if nested and _targets(node, name, path.name == "__init__.py", names):
                hidden.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert any(_within(name, SEPARATE) for name in modules), "no demo or simulator modules found"
    assert not hidden, f"{len(hidden)} function-level imports of yuxi_dash modules:\n" + "\n".join(
        hidden
    )


def test_only_the_dashboard_imports_the_ui_package() -> None:
    modules = _package_modules()
    names = set(modules)
    offenders = []
    for name, path in modules.items():
        if _within(name, (UI,)):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, _nested in _imports(tree):
            if any(
                _within(t, (UI,)) for t in _targets(node, name, path.name == "__init__.py", names)
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert any(_within(name, (UI,)) for name in modules), "no yuxi_dash.ui modules found"
    assert not offenders, "modules outside yuxi_dash.ui import it:\n" + "\n".join(offenders)


# --- rooms ---------------------------------------------------------------------

MAX_MODULES = 15  # .py files side by side in one folder, __init__.py included

# Each memory room may import the rooms before it, never one after it.
MEMORY_LAYERS: tuple[str, ...] = (
    "yuxi_dash.memory.graph",
    "yuxi_dash.memory.freshness",
    "yuxi_dash.memory.views",
    "yuxi_dash.memory.desk",
)
# The workdir and its files, and roles and audit, sit under every feature room.
LOW_ROOMS: tuple[str, ...] = ("yuxi_dash.files", "yuxi_dash.access")
# The timer loop and the advisory-lock leader the background jobs build on.
SHARED_PIECES: tuple[str, ...] = ("yuxi_dash.background", "yuxi_dash.leader")
HIGH_ROOMS: tuple[str, ...] = (
    "yuxi_dash.alerts",
    "yuxi_dash.api",
    "yuxi_dash.attach",
    "yuxi_dash.cli",
    "yuxi_dash.compression",
    "yuxi_dash.demo",
    "yuxi_dash.memory",
    "yuxi_dash.platform",
    "yuxi_dash.service",
    "yuxi_dash.sim",
    "yuxi_dash.ui",
)


def test_no_folder_holds_more_than_the_room_limit() -> None:
    crowded = []
    for folder in sorted({path.parent for path in PACKAGE.rglob("*.py")}):
        count = len(list(folder.glob("*.py")))
        if count > MAX_MODULES:
            crowded.append(f"{folder.relative_to(REPO)}: {count} modules")
    assert not crowded, f"more than {MAX_MODULES} modules in one folder:\n" + "\n".join(crowded)


def test_the_memory_rooms_import_one_way() -> None:
    graph = _graph()
    assert all(any(_within(name, (room,)) for name in graph) for room in MEMORY_LAYERS)
    backwards = []
    for name, targets in graph.items():
        rank = next((i for i, room in enumerate(MEMORY_LAYERS) if _within(name, (room,))), None)
        if rank is None:
            continue
        for target in targets:
            if _within(target, MEMORY_LAYERS[rank + 1 :]):
                backwards.append(f"{name} -> {target}")
    assert not backwards, "memory rooms imported upwards:\n" + "\n".join(sorted(backwards))


def test_the_files_and_access_rooms_import_no_feature_room() -> None:
    graph = _graph()
    assert all(any(_within(name, (room,)) for name in graph) for room in LOW_ROOMS)
    upwards = [
        f"{name} -> {target}"
        for name, targets in graph.items()
        if _within(name, LOW_ROOMS)
        for target in targets
        if _within(target, HIGH_ROOMS)
        or (_within(name, ("yuxi_dash.access",)) and _within(target, ("yuxi_dash.files",)))
    ]
    assert not upwards, "low rooms importing feature rooms:\n" + "\n".join(sorted(upwards))


def test_the_background_loop_and_the_leader_import_no_feature_room() -> None:
    graph = _graph()
    assert all(piece in graph for piece in SHARED_PIECES)
    upwards = [
        f"{name} -> {target}"
        for name in SHARED_PIECES
        for target in graph[name]
        if _within(target, HIGH_ROOMS)
    ]
    assert not upwards, "shared pieces importing feature rooms:\n" + "\n".join(sorted(upwards))
