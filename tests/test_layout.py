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
- The rooms stand on floors (`LAYERS`, lowest first; docs/architecture.md draws the
  same table): a module imports only its own floor and the floors below it.
- Whose thread it is is decided by `store.origin` and `sources/` only: origin checks
  anywhere else are listed in `ORIGIN_CHECKS_ELSEWHERE`, at most five.

An edge A -> B is an explicit `import B` / `from B import x` in A (`from P import m`
is an edge to the module P.m when it exists). Importing P.m from outside the package P
first runs P's `__init__`, so that is an edge to P too (and to every package between).
Imports under `if TYPE_CHECKING:` never run and are left out.
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
    pages = [(f"app_pages.{path.stem}", path) for path in sorted((REPO / "app_pages").glob("*.py"))]
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


def _with_packages(importer: str, targets: set[str], packages: set[str]) -> set[str]:
    """``targets`` plus each package whose `__init__` importing them runs first: every parent
    package of a target that ``importer`` is not inside (its own ran already)."""
    found = set(targets)
    for target in targets:
        parts = target.split(".")
        for cut in range(2, len(parts)):
            parent = ".".join(parts[:cut])
            if parent in packages and not _within(importer, (parent,)):
                found.add(parent)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _package_modules()
    names = set(modules)
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = set()
        for node, _nested in _imports(tree):
            targets = _targets(node, name, is_package, names)
            graph[name] |= _with_packages(name, targets, packages) - {name}
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


def test_importing_a_module_of_a_package_counts_the_package() -> None:
    """The checker itself: from outside, `p.b.c` runs `p.b`'s `__init__`; from inside, not."""
    packages = {"p", "p.b"}
    assert _with_packages("p.a", {"p.b.c"}, packages) == {"p.b.c", "p.b"}
    assert _with_packages("p.b.d", {"p.b.c"}, packages) == {"p.b.c"}
    assert _with_packages("q.x", {"p.b.c"}, packages) == {"p.b.c", "p.b"}  # `p` is the root


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

# The floors, lowest first: a module imports its own floor and the ones below, never one
# above. A module stands on the floor of the longest room that holds it. docs/architecture.md
# draws this table; change both together.
LAYERS: tuple[tuple[str, ...], ...] = (
    (  # the base: settings, errors, input rules, wording, outside calls and text
        "yuxi_dash.errors",
        "yuxi_dash.validation",
        "yuxi_dash.settings",
        "yuxi_dash.wording",
        "yuxi_dash.printable_record",
        "yuxi_dash.outside_text",
        "yuxi_dash.outbound",
        "yuxi_dash.usage",
        "yuxi_dash.agents",
        "yuxi_dash.resources",
        "yuxi_dash.flags",
    ),
    ("yuxi_dash.files",),  # the workdir: bytes on disk, no database
    ("yuxi_dash.compression",),  # the engine, pure Python
    ("yuxi_dash.store",),  # tables, checkpointers, read queries, whose thread it is
    ("yuxi_dash.costs",),  # model prices and what recorded calls cost
    ("yuxi_dash.access",),  # roles and the audit log
    ("yuxi_dash.leader", "yuxi_dash.background"),  # what every background job builds on
    ("yuxi_dash.alerts",),
    ("yuxi_dash.service",),  # our own threads
    ("yuxi_dash.attach",),  # the platform's checkpointer, read-only
    ("yuxi_dash.platform",),  # the platform's endpoint
    ("yuxi_dash.sources",),  # one thread, one source
    ("yuxi_dash.tool_results",),
    ("yuxi_dash.tuning",),  # recorded threads replayed under other settings
    ("yuxi_dash.memory.graph",),
    ("yuxi_dash.memory.cache",),
    ("yuxi_dash.memory.views",),
    ("yuxi_dash.memory.history", "yuxi_dash.memory.quality"),  # memory over time, and its quality
    ("yuxi_dash.memory.support",),
    ("yuxi_dash.memory",),  # the package's own `__init__`
    ("yuxi_dash.api",),
    ("yuxi_dash.ui",),
    ("yuxi_dash.sim",),
    ("yuxi_dash.demo",),
    ("yuxi_dash.cli",),
    ("yuxi_dash.__main__",),
)


def _floor(name: str) -> int | None:
    """The floor of a module: the longest room in `LAYERS` that holds it."""
    best: tuple[int, int] | None = None
    for floor, rooms in enumerate(LAYERS):
        for room in rooms:
            if _within(name, (room,)) and (best is None or len(room) > best[1]):
                best = (floor, len(room))
    return best[0] if best else None


def test_no_folder_holds_more_than_the_room_limit() -> None:
    crowded = []
    for folder in sorted({path.parent for path in PACKAGE.rglob("*.py")}):
        count = len(list(folder.glob("*.py")))
        if count > MAX_MODULES:
            crowded.append(f"{folder.relative_to(REPO)}: {count} modules")
    assert not crowded, f"more than {MAX_MODULES} modules in one folder:\n" + "\n".join(crowded)


def test_every_module_stands_on_a_floor() -> None:
    homeless = [name for name in _graph() if name != "yuxi_dash" and _floor(name) is None]
    assert not homeless, "modules on no floor of LAYERS:\n" + "\n".join(sorted(homeless))


def test_no_module_imports_a_floor_above_its_own() -> None:
    graph = _graph()
    assert len({_floor(name) for name in graph} - {None}) == len(LAYERS)  # no floor is empty
    upwards = [
        f"{name} (floor {_floor(name)}) -> {target} (floor {_floor(target)})"
        for name, targets in graph.items()
        for target in targets
        if name != "yuxi_dash" and (_floor(target) or 0) > (_floor(name) or 0)
    ]
    assert not upwards, "imports from a lower floor up:\n" + "\n".join(sorted(upwards))


def test_the_floor_checker_sees_an_import_upwards() -> None:
    """The checker itself: the service importing the platform is upwards; the reverse is not."""
    service, platform = _floor("yuxi_dash.service.locking"), _floor("yuxi_dash.platform.compress")
    assert service is not None and platform is not None and platform > service
    graph_floor, package_floor = _floor("yuxi_dash.memory.graph.cypher"), _floor("yuxi_dash.memory")
    assert graph_floor is not None and package_floor is not None and graph_floor < package_floor


# --- whose thread it is ------------------------------------------------------------

# Where "ours or the platform's" is decided: the resolver and the two sources.
ORIGIN_DECIDERS: tuple[str, ...] = ("yuxi_dash.store.origin", "yuxi_dash.sources")
ORIGIN_NAMES = frozenset({"ORIGIN_ATTACHED", "ORIGIN_DASHBOARD"})
# Each origin check outside the deciders, and why it stays (module -> how many).
ORIGIN_CHECKS_ELSEWHERE: dict[str, int] = {
    "yuxi_dash.cli.attach": 1,  # `attach status` shows whether the platform's endpoint is set
    "yuxi_dash.service.threads": 1,  # an import never replaces the platform's thread
}
MAX_ORIGIN_CHECKS_ELSEWHERE = 5


def _origin_checks(tree: ast.Module) -> list[int]:
    """The lines that test a thread's origin themselves: a comparison with an ``ORIGIN_*``
    constant or an origin's value ("attached", "dashboard"), or a read of
    ``platform_configured`` (where an attached thread's compress goes)."""

    def is_origin_value(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in ORIGIN_NAMES) or (
            isinstance(node, ast.Constant) and node.value in ("attached", "dashboard")
        )

    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(is_origin_value, operands)) and not all(
                isinstance(o, ast.Constant) for o in operands
            ):
                lines.add(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "platform_configured":
            lines.add(node.lineno)
    return sorted(lines)


def _origin_checks_outside() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for name, path in [*_package_modules().items(), *_product_files()]:
        if _within(name, ORIGIN_DECIDERS) or name == "yuxi_dash.settings":
            continue
        lines = _origin_checks(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if lines:
            found[name] = sorted(set(lines))
    return found


def test_origin_is_decided_in_one_place() -> None:
    found = _origin_checks_outside()
    counted = {name: len(lines) for name, lines in found.items()}
    assert counted == ORIGIN_CHECKS_ELSEWHERE, "origin checks outside the resolver: " + str(found)
    assert sum(counted.values()) <= MAX_ORIGIN_CHECKS_ELSEWHERE


def test_the_origin_counter_sees_a_check() -> None:
    """The checker itself: both comparisons and the setting's read are counted."""
    tree = ast.parse(
        "if conv.origin == ORIGIN_ATTACHED:\n    pass\n"
        "x = settings.platform_configured\n"
        "y = origin != 'attached'\n"
        "z = row.status == 'deleted'\n"
        "w = origin is not None\n"
    )
    assert _origin_checks(tree) == [1, 3, 4]
