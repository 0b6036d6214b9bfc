"""The one place for errors (`yuxi_dash.errors`): every exception class of the package is there.

Each module of `yuxi_dash` (but the entry point and the Alembic scripts, which run
on import) is imported and every class it defines is checked: an exception class
must be defined in `yuxi_dash.errors` and derive from `YuxiDashError`, and codes
are unique, so a caller can act on `code` alone.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import yuxi_dash
from yuxi_dash import errors
from yuxi_dash.errors import YuxiDashError

PACKAGE = Path(yuxi_dash.__file__).parent
SKIPPED = ("__main__.py", "migrations")


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent)
        if any(part in SKIPPED for part in relative.parts):
            continue
        names.append(".".join(relative.with_suffix("").parts).removesuffix(".__init__"))
    return names


def _defined_classes(module: str) -> list[type]:
    """The classes `module` defines at its top level (read from its source, then imported)."""
    loaded = importlib.import_module(module)
    tree = ast.parse(Path(str(loaded.__file__)).read_text(encoding="utf-8"))
    names = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    return [getattr(loaded, name) for name in names]


def _all_errors(cls: type[YuxiDashError]) -> list[type[YuxiDashError]]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _all_errors(child))]


def test_every_exception_class_is_in_the_errors_module_and_derives_from_the_base() -> None:
    misplaced = []
    for module in _modules():
        for cls in _defined_classes(module):
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                continue
            if module != errors.__name__ or not issubclass(cls, YuxiDashError):
                misplaced.append(f"{module}.{cls.__name__}")
    assert not misplaced, f"define these in yuxi_dash/errors.py, under YuxiDashError: {misplaced}"


def test_every_error_has_its_own_code() -> None:
    for module in _modules():  # load every subclass there is
        importlib.import_module(module)
    found = _all_errors(YuxiDashError)
    codes = [cls.code for cls in found]
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)
    assert {cls.__module__ for cls in found} == {errors.__name__}
