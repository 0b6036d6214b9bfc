"""Every module path the prose names exists (read from the source; nothing is imported).

Where: docstrings and comments in `yuxi_dash/`, `app_pages/` and `app.py`; README.md and
docs/*.md. A name is `yuxi_dash.a.b` or `yuxi_dash/a/b.py` anywhere; or, relative to
yuxi_dash, `a.b` or `a/b.py` in backticks whose first part is a top-level module or
package (`memory.graph.client`, `settings.py`); or, in a docstring or comment, a bare
`a.b` whose first part is a top-level package (`memory.client`).

A dotted name resolves through its longest module prefix, then names defined in that
module (a class's names after a class); `settings.x` may also be a field of `Settings`.
A name with `/` (or `a.py`) is a file or folder under the repository. A relative
two-part name the code holds as a string (an audit action such as `memory.bundle`) is a
value, not a path. Each failure names the file, the line and the name.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "yuxi_dash"

_ABSOLUTE_DOTTED = re.compile(r"(?<![\w./-])yuxi_dash(?:\.[A-Za-z_]\w*)+")
_ABSOLUTE_PATH = re.compile(r"(?<![\w./-])yuxi_dash/[\w/]*(?:\.[a-z]+)?")
_BACKTICKED = re.compile(r"(?<!`)`([^`\s]+)`(?!`)")
_BARE_DOTTED = re.compile(r"(?<![\w./`-])([a-z_]\w*(?:\.[A-Za-z_]\w*)+)")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_FILE = re.compile(r"^[A-Za-z_]\w*(?:/[A-Za-z_]\w*)*(?:\.py|/)$|^[A-Za-z_]\w*(?:/[A-Za-z_]\w*)+$")
_VALUE = re.compile(r"^[a-z_]+\.[a-z_]+$")


def _top_level() -> tuple[set[str], set[str]]:
    """(modules and packages, packages) directly under yuxi_dash/."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return modules | packages, packages


TOP_LEVEL, PACKAGES = _top_level()


def _source_files() -> list[Path]:
    return [
        *sorted(PACKAGE.rglob("*.py")),
        *sorted((REPO / "app_pages").glob("*.py")),
        REPO / "app.py",
    ]


def _prose_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@cache
def _values() -> frozenset[str]:
    """Two-part dotted strings the code holds (audit actions): values, not module paths."""
    found: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _VALUE.match(node.value):
                    found.add(node.value)
    return frozenset(found)


def python_prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring line (module, class, function) and comment."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                first = node.body[0].lineno
                for offset, line in enumerate(docstring.splitlines()):
                    yield first + offset, line
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def names_in(text: str, *, bare: bool) -> Iterator[str]:
    """The module paths one line of prose names, as `yuxi_dash.a.b` or `yuxi_dash/a/b.py`."""
    for match in _ABSOLUTE_DOTTED.finditer(text):
        yield match.group(0)
    for match in _ABSOLUTE_PATH.finditer(text):
        yield match.group(0)
    for match in _BACKTICKED.finditer(text):
        name = match.group(1)
        if re.split(r"[./]", name, maxsplit=1)[0] not in TOP_LEVEL:
            continue
        if _FILE.match(name):
            yield "yuxi_dash/" + name
        elif _DOTTED.match(name) and name not in _values():
            yield "yuxi_dash." + name
    if bare:
        for match in _BARE_DOTTED.finditer(_BACKTICKED.sub(" ", text)):
            name = match.group(1)
            if name.split(".")[0] in PACKAGES and name not in _values():
                yield "yuxi_dash." + name


def resolves(name: str) -> bool:
    """Whether a dotted name is a module, package or defined name, or a path a file or folder."""
    if "/" in name:
        path = REPO / name
        return path.is_dir() if name.endswith("/") else path.exists()
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(parts[:cut])
        if module is not None:
            rest = parts[cut:]
            tree = ast.parse(module.read_text(encoding="utf-8"))
            if _defined(tree.body, rest):
                return True
            if parts[:cut] == ["yuxi_dash", "settings"]:  # `settings.x`: the Settings field x
                return _defined(tree.body, ["Settings", *rest])
            return False
    return False


def _module_file(parts: list[str]) -> Path | None:
    relative = REPO.joinpath(*parts)
    for candidate in (relative.with_suffix(".py"), relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defined(body: list[ast.stmt], names: list[str]) -> bool:
    """Whether `names` is a chain of names defined in `body` (a class's body after a class)."""
    if not names:
        return True
    first, rest = names[0], names[1:]
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name == first:
            return _defined(node.body, rest)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == first:
            return not rest
        if first in _bound(node):
            return not rest
    return False


def _bound(node: ast.stmt) -> set[str]:
    """The names an assignment or import binds (under `if`/`try` too)."""
    if isinstance(node, ast.Assign):
        return {
            t.id for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)
        }
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.If | ast.Try):
        inner = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
        return set().union(*(_bound(child) for child in inner)) if inner else set()
    return set()


def _references() -> Iterator[tuple[str, int, str]]:
    for path in _source_files():
        for line, text in python_prose(path.read_text(encoding="utf-8")):
            for name in names_in(text, bare=True):
                yield str(path.relative_to(REPO)), line, name
    for path in _prose_files():
        for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for name in names_in(text, bare=False):
                yield str(path.relative_to(REPO)), line, name


def test_every_module_path_named_in_prose_exists() -> None:
    stale = [f"{where}:{line}: {name}" for where, line, name in _references() if not resolves(name)]
    assert not stale, "module paths that do not exist (point at the module that owns it now):\n" + (
        "\n".join(stale)
    )


def test_the_checker_reads_names_and_resolves_them() -> None:
    line = (
        "see yuxi_dash.memory.client, `memory/graph/client.py`, memory.graph_changes, "
        "`settings.falkordb_query_timeout_ms`, `memory.bundle` and `tests/test_prose.py`"
    )
    assert list(names_in(line, bare=True)) == [
        "yuxi_dash.memory.client",
        "yuxi_dash/memory/graph/client.py",
        "yuxi_dash.settings.falkordb_query_timeout_ms",
        "yuxi_dash.memory.graph_changes",
    ]
    assert list(names_in("memory.graph_changes", bare=False)) == []
    assert not resolves("yuxi_dash.memory.client")
    assert not resolves("yuxi_dash.memory.graph.client.NoSuchName")
    assert not resolves("yuxi_dash/memory/client.py")
    assert not resolves("yuxi_dash.settings.no_such_field")
    assert resolves("yuxi_dash.memory.graph.client.GraphClient")
    assert resolves("yuxi_dash.store.checkpointer.CheckpointStore.write")
    assert resolves("yuxi_dash.settings.falkordb_query_timeout_ms")
    assert resolves("yuxi_dash/memory/graph/client.py")
    assert resolves("yuxi_dash/cli/memory/")
