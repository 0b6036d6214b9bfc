"""setup.py's choice of build: compiled preview for wheels, never for editable installs.

The compiling branch itself runs in CI (`.ci/run` builds the wheel with
``YUXI_DASH_COMPILE=1`` and tests it); these cover every branch that decides
not to compile, without building anything.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def _setup_module() -> dict[str, Any]:
    return runpy.run_path(str(SETUP), run_name="yuxi_dash_setup")  # not "__main__": no setup()


def _ext_modules(monkeypatch: pytest.MonkeyPatch, *argv: str, **env: str) -> Any:
    monkeypatch.setattr(sys, "argv", ["setup.py", *argv])
    for name in ("YUXI_DASH_COMPILE", "CC"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return _setup_module()["_ext_modules"]()


@pytest.mark.parametrize(
    "argv",
    [
        ("editable_wheel", "--dist-dir", "x"),
        ("develop",),
        ("egg_info",),
        ("dist_info",),
        ("sdist",),
    ],
)
def test_editable_installs_and_metadata_never_compile(
    monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...]
) -> None:
    assert _ext_modules(monkeypatch, *argv, YUXI_DASH_COMPILE="1") == []


def test_a_wheel_without_a_c_compiler_is_pure_python_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _ext_modules(monkeypatch, "bdist_wheel", CC="no-such-cc") == []
    assert "building pure Python (no C compiler (no-such-cc) on PATH)" in capsys.readouterr().err


def test_compile_required_without_a_compiler_fails_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SystemExit, match="YUXI_DASH_COMPILE=1 but cannot compile: no C compiler"):
        _ext_modules(monkeypatch, "bdist_wheel", CC="no-such-cc", YUXI_DASH_COMPILE="1")


def test_compile_off_builds_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ext_modules(monkeypatch, "bdist_wheel", YUXI_DASH_COMPILE="0") == []


def test_an_unknown_compile_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match="YUXI_DASH_COMPILE must be auto, 0 or 1, not 'yes'"):
        _ext_modules(monkeypatch, "bdist_wheel", YUXI_DASH_COMPILE="yes")
