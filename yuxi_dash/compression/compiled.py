"""Which build of the tool-result preview this process runs: mypyc-compiled or pure Python.

``setup.py`` compiles the five modules in :data:`PREVIEW_MODULES` into extension
modules when it builds a wheel (``pip install .``, the Docker image); an
editable install, or a build without a C compiler, runs their ``.py`` files.
Both builds make the same previews (CI checks them against each other on the
whole bench corpus); the compiled one is faster. The CLI's ``--version`` and
``bench/compaction.py`` say which one they run.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from types import ModuleType
from typing import Literal

from yuxi_dash.compression import clipping, evidence, preview, records, salvage

# setup.py lists the same files (tests/compression/test_compiled.py holds them equal).
PREVIEW_MODULES: tuple[ModuleType, ...] = (clipping, evidence, salvage, preview, records)

PreviewBuild = Literal["compiled", "pure Python", "mixed"]


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from an extension module (not from its source)."""
    return str(getattr(module, "__file__", "") or "").endswith(tuple(EXTENSION_SUFFIXES))


def preview_build() -> PreviewBuild:
    """``compiled`` when all the preview modules are compiled, ``pure Python`` when none.

    ``mixed`` means a broken install (a stale extension beside edited sources):
    mypyc's modules call each other natively, so they must be built together.
    """
    compiled = [is_compiled(module) for module in PREVIEW_MODULES]
    if all(compiled):
        return "compiled"
    return "mixed" if any(compiled) else "pure Python"
