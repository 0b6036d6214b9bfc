"""Build: the package, with the tool-result preview's hot modules compiled by mypyc.

Everything else about the package lives in pyproject.toml; this file only adds
the compiled extension modules, and only when it is safe to:

- a wheel build (``pip install .``, ``pip wheel .``, ``python -m build``)
  compiles ``yuxi_dash/compression/{clipping,evidence,salvage,preview,records}.py``
  when a C compiler and the Python headers are present. The wheel keeps the
  ``.py`` files too; the compiled module is found first.
- an editable install (``pip install -e .``) never compiles: an ``.so`` next
  to its ``.py`` in the source tree would shadow every later edit.
- ``YUXI_DASH_COMPILE=0`` builds pure Python; ``YUXI_DASH_COMPILE=1`` fails
  the build when it cannot compile (CI and the Docker image use it, so a
  compiled build can never silently turn into a slower pure one).

The compiled modules behave exactly as the pure ones (the preview tests run
against both in CI); they only run faster. mypyc type-checks them in
isolation here (``--follow-imports=silent``, no project config), because the
build environment holds mypy and setuptools, not the package's dependencies.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from setuptools import setup

COMPILED_MODULES = [
    "yuxi_dash/compression/clipping.py",
    "yuxi_dash/compression/evidence.py",
    "yuxi_dash/compression/salvage.py",
    "yuxi_dash/compression/preview.py",
    "yuxi_dash/compression/records.py",
]
# Only these commands produce built code; metadata, sdist and editable builds
# (`editable_wheel`, `develop`) stay pure.
_BUILD_COMMANDS = {"bdist_wheel", "build", "build_ext", "install"}


def _compile_choice() -> str:
    choice = os.environ.get("YUXI_DASH_COMPILE", "auto").strip().lower() or "auto"
    if choice not in {"auto", "0", "1"}:
        sys.exit(f"YUXI_DASH_COMPILE must be auto, 0 or 1, not {choice!r}")
    return choice


def _can_compile() -> tuple[bool, str]:
    """Whether a C compiler and Python.h are here (what building an extension needs)."""
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return False, f"no C compiler ({compiler}) on PATH"
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return False, f"no Python headers ({include}/Python.h)"
    return True, ""


def _ext_modules() -> list:
    if not set(sys.argv[1:]) & _BUILD_COMMANDS:
        return []
    choice = _compile_choice()
    if choice == "0":
        return []
    able, why = _can_compile()
    if not able:
        if choice == "1":
            sys.exit(f"YUXI_DASH_COMPILE=1 but cannot compile: {why}")
        print(f"yuxi-dash: building pure Python ({why}); previews will be slower", file=sys.stderr)
        return []
    from mypyc.build import mypycify  # a build requirement, needed only here

    return mypycify(
        [
            "--config-file=",  # not the project's: its plugin needs packages the build lacks
            "--follow-imports=silent",
            "--ignore-missing-imports",
            *COMPILED_MODULES,
        ],
        opt_level="3",
        group_name="yuxi_dash_preview",
    )


if __name__ == "__main__":  # how setuptools' build backend and `python setup.py` run this file
    setup(ext_modules=_ext_modules())
